// Runs one piece of an eval's JavaScript the way promptfoo runs it, for runner/grading/scripts.py.
//
// Reads a JSON request on stdin: {code, inline, function, filename, args, workdir, resultPath}.
// Inline code is a function body over (output, context): one line is an expression (or
// declarations ending in one), several lines are a body with its own return. A file's text is
// written under workdir with its own name and loaded as a module; its named function, else the
// module's exported function, is called. The value (awaited) is written as JSON to resultPath;
// what the code prints goes to stdout and stderr as usual.
'use strict';

const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

function inlineFunction(code) {
  const trimmed = code.trimEnd();
  if (trimmed.includes('\n')) {
    return new Function('output', 'context', trimmed);
  }
  const line = trimmed.trim().replace(/;+\s*$/, '');
  if (/^(const|let|var)\s/.test(line)) {
    // Declarations then an expression: return the expression after the last statement
    // separator that leaves valid code (a semicolon inside a string does not).
    for (let at = line.lastIndexOf(';'); at > 0; at = line.lastIndexOf(';', at - 1)) {
      try {
        return new Function('output', 'context', `${line.slice(0, at + 1)} return ${line.slice(at + 1)}`);
      } catch (err) {
        if (!(err instanceof SyntaxError)) throw err;
      }
    }
    return new Function('output', 'context', line);
  }
  return new Function('output', 'context', `return ${line}`);
}

async function loadModule(request) {
  const file = path.join(request.workdir, path.basename(request.filename));
  fs.writeFileSync(file, request.code);
  if (!file.endsWith('.mjs')) {
    try {
      return require(file);
    } catch (err) {
      const esm = err && (err.code === 'ERR_REQUIRE_ESM' || /\b(export|import)\b/.test(String(err.message)));
      if (!esm) throw err;
    }
  }
  const asModule = file.endsWith('.mjs') ? file : file.replace(/\.[^.]+$/, '') + '.mjs';
  if (asModule !== file) fs.copyFileSync(file, asModule);
  return import(pathToFileURL(asModule).href);
}

function chosenFunction(loaded, name, filename) {
  const candidates = [loaded, loaded && loaded.default];
  if (name) {
    for (const holder of candidates) {
      if (holder && typeof holder[name] === 'function') return holder[name];
    }
    throw new Error(`${filename} has no function ${name}`);
  }
  for (const holder of candidates) {
    if (typeof holder === 'function') return holder;
  }
  throw new Error(`${filename} exports no function (name one: file://${filename}:functionName)`);
}

async function main() {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  let result;
  try {
    const fn = request.inline
      ? inlineFunction(request.code)
      : chosenFunction(await loadModule(request), request.function, request.filename);
    const value = await fn(...request.args);
    result = { ok: true, defined: value !== undefined, value: value === undefined ? null : value };
  } catch (err) {
    result = { ok: false, error: err && err.stack ? String(err.stack) : String(err) };
  }
  fs.writeFileSync(request.resultPath, JSON.stringify(result));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err));
  process.exit(1);
});
