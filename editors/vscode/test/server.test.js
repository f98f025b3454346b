// laya-lsp driven over stdio by VS Code's own protocol libraries (vscode-jsonrpc and
// vscode-languageserver-protocol, the ones vscode-languageclient 9 runs on), with the initialize
// params the extension sends: the capabilities vscode-languageclient computes (see
// client-capabilities.js), the initializationOptions extension.js builds from the declared
// settings (settings.js, shared with the extension), an `untitled:` document as VS Code opens
// one. Run: `npm test` (node's test runner). The server is $LAYA_LSP, else the repository's
// .venv/bin/laya-lsp, else laya-lsp on PATH.
'use strict';

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const cp = require('node:child_process');
const path = require('node:path');
const rpc = require('vscode-languageserver-protocol/node');

const { DOCUMENT_SELECTOR, findExecutable, initializationOptions } = require('../settings');
const { clientCapabilities } = require('./client-capabilities');
const pkg = require('../package.json');

const DECLARED = pkg.contributes.configuration.properties;
const SERVER = findExecutable(process.env.LAYA_LSP || '')
  || findExecutable(path.resolve(__dirname, '../../../.venv/bin/laya-lsp'))
  || findExecutable('laya-lsp');
const skip = SERVER ? false : 'no laya-lsp: set $LAYA_LSP or pip install -e . in the repository';

// What VS Code's configuration returns for `settings` over the declared defaults.
function optionsFor(settings = {}) {
  return initializationOptions(DECLARED, (name) => (name in settings ? settings[name] : DECLARED[`laya.${name}`].default));
}

// Start a server and initialize it as the extension would; collects what the server sends.
async function session(settings) {
  // vscode-languageclient appends --stdio to the command's args for TransportKind.stdio
  const proc = cp.spawn(SERVER, ['--stdio'], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, HF_HUB_OFFLINE: '1' } });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
  const conn = rpc.createProtocolConnection(new rpc.StreamMessageReader(proc.stdout), new rpc.StreamMessageWriter(proc.stdin));
  const s = { proc, conn, exited, shown: [], logged: [], stderr: () => stderr };
  conn.onNotification(rpc.ShowMessageNotification.type, (p) => s.shown.push(p));
  conn.onNotification(rpc.LogMessageNotification.type, (p) => s.logged.push(p));
  conn.onNotification('$/progress', () => {});
  conn.onRequest(rpc.WorkDoneProgressCreateRequest.type, () => null);
  conn.onRequest(rpc.RegistrationRequest.type, () => null);
  conn.onRequest(rpc.ConfigurationRequest.type, (p) => p.items.map(() => null));
  conn.listen();
  const { capabilities, vscodeVersion } = clientCapabilities(DOCUMENT_SELECTOR);
  s.initializationOptions = optionsFor(settings);
  s.result = await conn.sendRequest(rpc.InitializeRequest.type, {
    processId: process.pid,
    clientInfo: { name: 'Visual Studio Code', version: vscodeVersion },
    locale: 'en',
    rootPath: null,
    rootUri: null,
    capabilities,
    initializationOptions: s.initializationOptions,
    trace: 'off',
    workspaceFolders: null,
  });
  await conn.sendNotification(rpc.InitializedNotification.type, {});
  return s;
}

async function close(s) {
  await s.conn.sendRequest(rpc.ShutdownRequest.type);
  await s.conn.sendNotification(rpc.ExitNotification.type);
  const code = await s.exited;
  s.conn.dispose();
  return code;
}

let untitled = 0;
async function open(s, text, languageId = 'python') {
  const uri = `untitled:Untitled-${++untitled}`; // an unsaved editor, as VS Code names it
  await s.conn.sendNotification(rpc.DidOpenTextDocumentNotification.type,
    { textDocument: { uri, languageId, version: 1, text } });
  return uri;
}

function complete(s, uri, line, character) {
  return s.conn.sendRequest(rpc.CompletionRequest.type,
    { textDocument: { uri }, position: { line, character }, context: { triggerKind: 1 } });
}

describe('laya-lsp with the VS Code extension\'s initialize params', { skip, timeout: 180_000 }, () => {
  let s;
  before(async () => { s = await session(); });
  after(async () => { if (s) assert.equal(await close(s), 0, s.stderr()); });

  test('the settings sent are the declared defaults, and the server accepts them', () => {
    assert.deepEqual(Object.keys(s.initializationOptions).sort(),
      Object.keys(DECLARED).filter((k) => k !== 'laya.serverPath').map((k) => k.slice(5)).sort());
    const caps = s.result.capabilities;
    assert.ok(caps.completionProvider, 'no completionProvider');
    assert.ok(caps.inlineCompletionProvider, 'no inlineCompletionProvider (enableInline defaults to true)');
    const sync = typeof caps.textDocumentSync === 'object' ? caps.textDocumentSync.change : caps.textDocumentSync;
    assert.equal(sync, rpc.TextDocumentSyncKind.Incremental);
  });

  test('an untitled document gets completions that replace the typed prefix', async () => {
    const uri = await open(s, 'import os\n\npath = os.pa');
    const list = await complete(s, uri, 2, 12);
    const items = Array.isArray(list) ? list : list.items;
    assert.ok(items.length > 0 && items.length <= DECLARED['laya.maxItems'].default, JSON.stringify(list));
    assert.ok(items.some((i) => i.label === 'path'), items.map((i) => i.label).join(', '));
    for (const item of items) {
      // the client declared insertReplaceSupport: an InsertReplaceEdit over "pa"
      assert.deepEqual(item.textEdit.insert, { start: { line: 2, character: 10 }, end: { line: 2, character: 12 } });
      assert.ok(item.textEdit.newText.startsWith('pa'), item.textEdit.newText);
    }
  });

  test('the commit message box (vscode-scm, scminput) gets prose words', async () => {
    const uri = 'vscode-scm:git/scm0/input?rootUri%3Dfile%253A%252F%252F%252Ftmp%252Frepo';
    await s.conn.sendNotification(rpc.DidOpenTextDocumentNotification.type, { textDocument: {
      uri, languageId: 'scminput', version: 1, text: 'Fix the parser so that it handles the documentation of the par' } });
    const list = await complete(s, uri, 0, 62);
    const labels = (Array.isArray(list) ? list : list.items).map((i) => i.label);
    assert.ok(labels.length > 0 && labels.every((l) => l.startsWith('par')), labels.join(', '));
    assert.ok(labels.includes('parser'), labels.join(', '));
  });

  test('typing on: an incremental change, then a completion at the new cursor', async () => {
    const uri = await open(s, 'import json\n\n');
    await s.conn.sendNotification(rpc.DidChangeTextDocumentNotification.type, {
      textDocument: { uri, version: 2 },
      contentChanges: [{ range: { start: { line: 2, character: 0 }, end: { line: 2, character: 0 } }, text: 'x = json.lo' }],
    });
    const list = await complete(s, uri, 2, 11);
    const labels = (Array.isArray(list) ? list : list.items).map((i) => i.label);
    assert.ok(labels.includes('loads') || labels.includes('load'), labels.join(', '));
  });

  test('inline completion answers at the cursor', async () => {
    const uri = await open(s, 'import os\n\n\ndef main(argv):\n    path = os.path.jo');
    const result = await s.conn.sendRequest('textDocument/inlineCompletion', {
      textDocument: { uri }, position: { line: 4, character: 21 }, context: { triggerKind: 1 },
    });
    const items = Array.isArray(result) ? result : result.items;
    assert.ok(Array.isArray(items), JSON.stringify(result));
  });

  test('no warning or error for the default settings', () => {
    assert.deepEqual(s.shown.filter((m) => m.type <= rpc.MessageType.Warning), []);
  });
});

describe('settings the user changed', { skip, timeout: 180_000 }, () => {
  test('valid settings apply', async () => {
    const s = await session({ maxItems: 3, enableInline: false, debounceMs: 10 });
    try {
      assert.equal(s.result.capabilities.inlineCompletionProvider, undefined);
      const uri = await open(s, 'import os\nos.pa');
      const list = await complete(s, uri, 1, 5);
      assert.ok(list.items.length > 0 && list.items.length <= 3, JSON.stringify(list));
    } finally {
      assert.equal(await close(s), 0);
    }
  });

  test('bad values are shown once by name, and completion goes on with the defaults', async () => {
    const s = await session({ maxItems: 5000, modelPath: '/nonexistent/laya-model' });
    try {
      const uri = await open(s, 'import os\nos.pa');
      const list = await complete(s, uri, 1, 5);
      assert.ok(list.items.length > 0 && list.items.length <= 20, JSON.stringify(list));
      for (let i = 0; i < 100 && s.shown.length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      const text = s.shown.map((m) => m.message).join('\n');
      assert.match(text, /maxItems/);
      assert.match(text, /\/nonexistent\/laya-model/);
      assert.ok(s.shown.every((m) => m.type === rpc.MessageType.Warning), text);
    } finally {
      assert.equal(await close(s), 0);
    }
  });
});

describe('what extension.js starts', () => {
  test('the document selector serves saved and untitled documents', () => {
    assert.deepEqual(DOCUMENT_SELECTOR.map((d) => d.scheme).sort(), ['file', 'untitled', 'vscode-scm']);
  });

  test('a serverPath that names nothing runnable is found before starting', () => {
    assert.equal(findExecutable('/nonexistent/laya-lsp'), null);
    assert.equal(findExecutable('laya-lsp-no-such-command', { PATH: '/usr/bin' }), null);
    assert.equal(findExecutable(''), null);
    assert.equal(findExecutable('node', { PATH: path.dirname(process.execPath) }), process.execPath);
  });

  test('the settings UI holds the server\'s bounds', () => {
    assert.equal(DECLARED['laya.maxItems'].maximum, 1000);
    assert.equal(DECLARED['laya.debounceMs'].maximum, 2000);
  });
});
