// The initialize capabilities vscode-languageclient 9 sends, computed by the library itself.
//
// `vscode-languageclient/node` needs the `vscode` module, which only exists inside VS Code. Here
// `require('vscode')` gets an inert stand-in (every property is another stand-in, `version` is the
// extension's minimum VS Code) just so the library loads; the LanguageClient is then built as
// extension.js builds it (registerProposedFeatures included) and its own
// computeClientCapabilities() fills the capabilities from each feature. Nothing is started.
'use strict';

const Module = require('module');

function inert(name) {
  const fn = function () {
    return inert(`${name}()`);
  };
  return new Proxy(fn, {
    get(_target, prop) {
      if (prop === Symbol.toPrimitive) return () => name;
      if (prop === 'then') return undefined; // not a promise
      return inert(`${name}.${String(prop)}`);
    },
    construct() {
      return inert(`new ${name}`);
    },
  });
}

function clientCapabilities(documentSelector) {
  const engine = require('../package.json').engines.vscode.replace(/^[^\d]*/, '');
  const stand = inert('vscode');
  const vscode = new Proxy({}, {
    get(_target, prop) {
      if (prop === 'version') return engine;
      if (prop === 'env') return { appName: 'Visual Studio Code', language: 'en' };
      return stand[prop];
    },
  });
  const load = Module._load;
  Module._load = function (request, ...rest) {
    return request === 'vscode' ? vscode : load.call(this, request, ...rest);
  };
  try {
    const { LanguageClient, TransportKind } = require('vscode-languageclient/node');
    const client = new LanguageClient('laya', 'Laya', { command: 'laya-lsp', transport: TransportKind.stdio },
      { documentSelector });
    client.registerProposedFeatures();
    return { capabilities: client.computeClientCapabilities(), vscodeVersion: engine };
  } finally {
    Module._load = load;
  }
}

module.exports = { clientCapabilities };
