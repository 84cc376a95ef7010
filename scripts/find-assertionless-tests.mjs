#!/usr/bin/env node
// Lists the tests that check nothing: every `it(...)` / `test(...)` whose
// callback never reaches an assertion. A test that only runs code passes as
// long as nothing throws, which is rarely what its name promises.
//
// What counts as an assertion: a call to `assert`, `assert.*`, `t.assert.*`,
// `expect(...)`, or to a function whose name starts with `assert`; and a call
// to any helper declared under test/ (or bench/) whose body, followed the same
// way through the helpers it calls, asserts or throws (a `waitFor` that throws
// on timeout checks its condition). Code under src/ never counts: a library
// call that happens not to throw checks nothing. Callees are resolved with the
// type checker, so imported helpers and methods are followed too.
//
// Usage: node scripts/find-assertionless-tests.mjs [paths...]
// (default: test/). Prints `file:line  name` per test and exits 1 if any.
import ts from 'typescript';
import { relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const roots = (process.argv.slice(2).length ? process.argv.slice(2) : ['test']).map((p) => resolve(p));
const helperRoots = ['test', 'bench'].map((d) => resolve(root, d) + sep);

const configPath = ts.findConfigFile(root, ts.sys.fileExists, 'tsconfig.json');
const config = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
const program = ts.createProgram(config.fileNames, config.options);
const checker = program.getTypeChecker();

const TEST_CALLS = new Set(['it', 'test']);

/** `it`, `test`, `it.only`, `test.skip`, `t.test`, ...: the name the call is made through. */
function testCallName(call) {
  const e = call.expression;
  if (ts.isIdentifier(e)) return TEST_CALLS.has(e.text) ? e.text : undefined;
  if (ts.isPropertyAccessExpression(e)) {
    if (TEST_CALLS.has(e.name.text)) return e.name.text; // t.test(...)
    if (ts.isIdentifier(e.expression) && TEST_CALLS.has(e.expression.text)) return `${e.expression.text}.${e.name.text}`;
  }
  return undefined;
}

/** True when the callee itself is an assertion: assert(...), assert.x(...), t.assert.x(...), expect(...), assertFoo(...). */
function isAssertionCallee(expr) {
  for (let e = expr; ; ) {
    if (ts.isIdentifier(e)) return e.text === 'expect' || /^assert/.test(e.text);
    if (ts.isPropertyAccessExpression(e)) {
      if (/^assert/.test(e.name.text)) return true;
      e = e.expression;
      continue;
    }
    if (ts.isCallExpression(e)) {
      e = e.expression; // expect(x).toBe(...)
      continue;
    }
    return false;
  }
}

const inHelpers = (decl) => {
  const file = decl.getSourceFile().fileName;
  return helperRoots.some((r) => resolve(file).startsWith(r));
};

/** The function bodies a callee may run, when they are test helpers. */
function helperBodies(callee) {
  let sym = checker.getSymbolAtLocation(ts.isPropertyAccessExpression(callee) ? callee.name : callee);
  if (!sym) return [];
  if (sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
  const out = [];
  for (const d of sym.declarations ?? []) {
    if (!inHelpers(d)) continue;
    if (ts.isFunctionLike(d) && d.body) out.push(d.body);
    else if (ts.isVariableDeclaration(d) && d.initializer && ts.isFunctionLike(d.initializer) && d.initializer.body) out.push(d.initializer.body);
  }
  return out;
}

const memo = new Map();

/**
 * Does running `node` reach an assertion? In a helper's own body (`helper`,
 * not in functions nested in it, such as a fake store's method) a `throw`
 * counts too: there it is the helper's check failing.
 */
function asserts(node, helper) {
  if (helper && memo.has(node)) return memo.get(node);
  if (helper) memo.set(node, false); // a cycle through helpers proves nothing
  let found = false;
  const visit = (n, nested) => {
    if (found) return;
    if (helper && !nested && ts.isThrowStatement(n)) found = true;
    else if (ts.isCallExpression(n) || ts.isNewExpression(n)) {
      if (ts.isCallExpression(n) && isAssertionCallee(n.expression)) found = true;
      else for (const body of helperBodies(n.expression)) if (asserts(body, true)) found = true;
    }
    const inner = nested || ts.isFunctionLike(n);
    if (!found) ts.forEachChild(n, (c) => visit(c, inner));
  };
  visit(node, false);
  if (helper) memo.set(node, found);
  return found;
}

/** The callback a test runs: its last function argument, or a named function passed by reference. */
function callbackOf(call) {
  for (let i = call.arguments.length - 1; i >= 0; i--) {
    const a = call.arguments[i];
    if (ts.isFunctionLike(a)) return a.body;
    if (ts.isIdentifier(a) || ts.isPropertyAccessExpression(a)) {
      const bodies = helperBodies(a);
      if (bodies.length) return bodies[0];
    }
  }
  return undefined;
}

const found = [];
for (const sf of program.getSourceFiles()) {
  const file = resolve(sf.fileName);
  if (!roots.some((r) => file === r || file.startsWith(r + sep))) continue;
  const visit = (n) => {
    if (ts.isCallExpression(n) && testCallName(n) && !/\.(skip|todo)$/.test(testCallName(n))) {
      const body = callbackOf(n);
      if (body && !asserts(body, false)) {
        const { line } = sf.getLineAndCharacterOfPosition(n.getStart(sf));
        const title = n.arguments[0];
        const name = title && (ts.isStringLiteralLike(title) ? title.text : title.getText(sf));
        found.push(`${relative(root, file)}:${line + 1}  ${name}`);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
}

for (const f of found) console.log(f);
console.log(`${found.length} test(s) with no assertion`);
process.exit(found.length ? 1 : 0);
