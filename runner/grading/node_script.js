// Runs one piece of an eval's JavaScript the way promptfoo runs it, for runner/grading/scripts.py.
//
// Reads a JSON request on stdin:
// {code, inline, function, filename, location, args, workdir, resultPath}.
// Inline code is a function body over (output, context): one line is an expression (or
// declarations ending in one), several lines are a body with its own return. A file's captured
// text is loaded as a module as if from its own place (``location``, when the file is still
// there), so its require('./helper') and __dirname work; an ES module is imported from its
// place when unchanged, else from a copy under workdir. Its named function, else the module's
// exported function, is called. The value (awaited) is written as JSON to resultPath; what the
// code prints goes to stdout and stderr as usual.
'use strict';

const fs = require('fs');
const Module = require('module');
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

function commonJs(code, filename) {
  const loaded = new Module(filename, null);
  loaded.filename = filename;
  loaded.paths = Module._nodeModulePaths(path.dirname(filename));
  loaded._compile(code, filename);
  return loaded.exports;
}

function unchangedAt(location, code) {
  try {
    return fs.readFileSync(location, 'utf8') === code;
  } catch (err) {
    return false;
  }
}

async function loadModule(request) {
  const place = request.location || path.join(request.workdir, path.basename(request.filename));
  if (!place.endsWith('.mjs')) {
    try {
      return commonJs(request.code, place);
    } catch (err) {
      const esm = err && (err.code === 'ERR_REQUIRE_ESM' || /\b(export|import)\b/.test(String(err.message)));
      if (!esm) throw err;
    }
  }
  if (request.location && request.location.endsWith('.mjs') && unchangedAt(request.location, request.code)) {
    return import(pathToFileURL(request.location).href);
  }
  const copy = path.join(request.workdir, path.basename(request.filename).replace(/\.[^.]+$/, '') + '.mjs');
  fs.writeFileSync(copy, request.code);
  return import(pathToFileURL(copy).href);
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
