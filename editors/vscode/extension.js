// Laya for VS Code: start laya-lsp over stdio, pass the `laya.*` settings as
// initializationOptions, offer a restart command. Debounce, caching and filtering live in the
// server, so this file stays thin. Bundled by esbuild into dist/extension.js (`npm run build`).
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');
const { DOCUMENT_SELECTOR, findExecutable, initializationOptions } = require('./settings');

let client; // the running LanguageClient, or undefined
let output; // the "Laya" output channel: this file's notes and the client's log
let queue = Promise.resolve(); // start, stop and restart run one at a time, in the order asked

function serialized(task) {
  const run = queue.then(task);
  queue = run.catch((err) => output.appendLine(`Laya: ${err && err.stack ? err.stack : err}`));
  return run;
}

async function start(context) {
  const config = vscode.workspace.getConfiguration('laya');
  const serverPath = config.get('serverPath') || 'laya-lsp';
  const command = findExecutable(serverPath);
  if (!command) {
    // the one message for this failure; fixing the setting restarts (onDidChangeConfiguration)
    vscode.window.showErrorMessage(
      `Laya: could not start the server: "${serverPath}" is not an executable file or a command ` +
        'on PATH. Set laya.serverPath to the laya-lsp in your virtual environment.',
    );
    return;
  }
  const declared = context.extension.packageJSON.contributes.configuration.properties;
  const candidate = new LanguageClient(
    'laya',
    'Laya',
    { command, args: [], transport: TransportKind.stdio },
    {
      documentSelector: DOCUMENT_SELECTOR,
      initializationOptions: initializationOptions(declared, (name) => config.get(name)),
      outputChannel: output,
    },
  );
  // In vscode-languageclient 9.0.1 `textDocument/inlineCompletion` (LSP 3.18) is still a proposed
  // feature: its InlineCompletionItemFeature is only created by ProposedFeatures.createAll, which
  // registerProposedFeatures() adds; the default feature set does not include it.
  candidate.registerProposedFeatures();
  try {
    await candidate.start();
    client = candidate;
  } catch (err) {
    // The client has shown its own error message (one per failure); a client whose start failed
    // can be neither stopped nor started again, so it is dropped and the next start makes a new one.
    output.appendLine(`Laya: the server did not start (${command}): ${err && err.message ? err.message : err}`);
  }
}

async function stop() {
  const old = client;
  client = undefined;
  if (old) {
    try {
      await old.stop();
    } catch (err) {
      output.appendLine(`Laya: stopping the server: ${err && err.message ? err.message : err}`);
    }
  }
}

function restart(context) {
  return serialized(async () => {
    await stop();
    await start(context);
  });
}

function activate(context) {
  output = vscode.window.createOutputChannel('Laya');
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('laya.restartServer', () => restart(context)),
    // initializationOptions are read once, at start: apply changed settings with a restart.
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('laya')) restart(context);
    }),
  );
  return serialized(() => start(context));
}

function deactivate() {
  return serialized(stop);
}

module.exports = { activate, deactivate };
