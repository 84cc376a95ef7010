/**
 * The code blocks of README.md that the package test builds and runs: every
 * ```ts block (compiled as a TypeScript module), every ```js block whose first
 * line names its file (`// example.cjs`), and the ```json blocks that are the
 * TypeScript configuration and the `allowScripts` an application needs.
 */
export interface ReadmeBlocks {
  /** ```ts blocks, in order. */
  ts: string[];
  /** ```js blocks by the file name on their first line. */
  js: Map<string, string>;
  /** The ```json block with `compilerOptions`, parsed. */
  tsconfig: { compilerOptions: Record<string, unknown> };
  /** The `allowScripts` object of the ```json block that has one. */
  allowScripts: Record<string, boolean>;
}

export function readmeBlocks(readme: string): ReadmeBlocks {
  const out: ReadmeBlocks = { ts: [], js: new Map(), tsconfig: { compilerOptions: {} }, allowScripts: {} };
  let sawTsconfig = false;
  let sawAllow = false;
  for (const m of readme.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    const [, lang, body] = m as unknown as [string, string, string];
    if (lang === 'ts') out.ts.push(body);
    else if (lang === 'js') {
      const name = /^\/\/ (\S+\.[cm]?js)\n/.exec(body)?.[1];
      if (!name) throw new Error(`README.md: a js block does not name its file on its first line:\n${body}`);
      out.js.set(name, body);
    } else if (lang === 'json') {
      const parsed = JSON.parse(body) as Record<string, unknown>;
      if ('compilerOptions' in parsed) {
        out.tsconfig = parsed as ReadmeBlocks['tsconfig'];
        sawTsconfig = true;
      }
      if ('allowScripts' in parsed) {
        out.allowScripts = parsed.allowScripts as Record<string, boolean>;
        sawAllow = true;
      }
    }
  }
  if (!sawTsconfig || !sawAllow || out.ts.length === 0 || out.js.size === 0) {
    throw new Error('README.md lost its tsconfig, allowScripts, TypeScript or CommonJS example');
  }
  return out;
}
