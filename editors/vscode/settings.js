// What the extension sends and starts, without the `vscode` module, so that a plain node test
// (test/server.test.js) builds exactly the same initializationOptions and finds the server the
// same way.
'use strict';

const fs = require('fs');
const path = require('path');

// Completions in saved files and in new, unsaved ones (`untitled:`), any language.
// vscode-scm: the Source Control view's commit message box (language scminput: prose)
const DOCUMENT_SELECTOR = [{ scheme: 'file' }, { scheme: 'untitled' }, { scheme: 'vscode-scm' }];

// The settings package.json declares (`declared`: contributes.configuration.properties) are the
// option list; laya.serverPath is this extension's own. `get(name)` reads a setting; unset ones
// come back as their declared default (null for modelPath and backend), which the server reads
// as "absent".
function initializationOptions(declared, get) {
  const options = {};
  for (const key of Object.keys(declared)) {
    const name = key.slice('laya.'.length);
    if (name !== 'serverPath') options[name] = get(name);
  }
  return options;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

// The file `command` starts: itself when it names a path (`~/` expanded), else the first match on
// PATH (with PATHEXT on Windows). null when there is none, so the extension can say so once.
function findExecutable(command, env = process.env) {
  if (!command) return null;
  if (command.startsWith('~/')) command = path.join(env.HOME || env.USERPROFILE || '', command.slice(2));
  if (command.includes('/') || command.includes('\\')) return isExecutable(command) ? command : null;
  const exts = process.platform === 'win32' ? (env.PATHEXT || '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    for (const ext of exts) {
      const file = path.join(dir, command + ext);
      if (dir && isExecutable(file)) return file;
    }
  }
  return null;
}

module.exports = { DOCUMENT_SELECTOR, initializationOptions, findExecutable };
