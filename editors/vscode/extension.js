// Laya for VS Code: start laya-lsp over stdio, pass the `laya.*` settings as
// initializationOptions, offer a restart command. Debounce, caching and filtering live in the
// server, so this file stays thin. Plain JavaScript: no build step.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

// The settings this extension declares (package.json) are the option list; serverPath is
// client-side only. Unset (null) settings are sent as null, which the server treats as absent.
function initializationOptions(context) {
  const declared = context.extension.packageJSON.contributes.configuration.properties;
  const config = vscode.workspace.getConfiguration('laya');
  const options = {};
  for (const key of Object.keys(declared)) {
    const name = key.slice('laya.'.length);
    if (name !== 'serverPath') options[name] = config.get(name);
  }
  return options;
}

async function start(context) {
  const command = vscode.workspace.getConfiguration('laya').get('serverPath') || 'laya-lsp';
  client = new LanguageClient(
    'laya',
    'Laya',
    { command, args: [], transport: TransportKind.stdio },
    {
      documentSelector: [{ scheme: 'file' }],
      initializationOptions: initializationOptions(context),
    },
  );
  // In vscode-languageclient 9.0.1 `textDocument/inlineCompletion` (LSP 3.18) is still a proposed
  // feature: its InlineCompletionItemFeature is only created by ProposedFeatures.createAll, which
  // registerProposedFeatures() adds; the default feature set does not include it.
  client.registerProposedFeatures();
  await client.start();
}

async function stop() {
  if (client) {
    const old = client;
    client = undefined;
    await old.stop();
  }
}

async function restart(context) {
  await stop();
  await start(context);
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('laya.restartServer', () => restart(context)),
    // initializationOptions are read once, at start: apply changed settings with a restart.
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('laya')) restart(context);
    }),
  );
  try {
    await start(context);
  } catch (err) {
    vscode.window.showErrorMessage(
      `Laya: could not start "${vscode.workspace.getConfiguration('laya').get('serverPath')}" ` +
        `(set laya.serverPath to the laya-lsp in your venv): ${err.message || err}`,
    );
  }
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate };
