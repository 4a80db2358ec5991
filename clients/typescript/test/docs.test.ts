/** docs/clients.md's TypeScript section run as written: in a new project that installs this package as the section
 * says, type-checked, run twice against the served Engram (the scripted model answers `Noted: <message>`). */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

import ts from "typescript";

import { engram, packageRoot, repositoryRoot } from "./support.js";

const MARKER = "<!-- typescript: clients/typescript/test/docs.test.ts runs this block -->";

function documented(): string {
  const markdown = readFileSync(new URL("docs/clients.md", repositoryRoot), "utf8");
  const code = /```ts\n(.*?)```/s.exec(markdown.split(MARKER)[1] ?? "")?.[1];
  assert.ok(code, `docs/clients.md has no ts block after ${MARKER}`);
  return code;
}

/** A new ES-module project with this package installed from its folder; the path of `source` compiled in it. */
function project(source: string): string {
  const folder = mkdtempSync(join(tmpdir(), "engram-docs-"));
  after(() => rmSync(folder, { recursive: true, force: true }));
  writeFileSync(join(folder, "package.json"), JSON.stringify({ type: "module" }));
  const npm = ["install", "--offline", "--no-audit", "--no-fund", "--silent", fileURLToPath(packageRoot)];
  execFileSync("npm", npm, { cwd: folder });
  writeFileSync(join(folder, "example.ts"), source);
  const program = ts.createProgram([join(folder, "example.ts")], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    strict: true,
    skipLibCheck: true,
    typeRoots: [fileURLToPath(new URL("node_modules/@types", packageRoot))],
    types: ["node"],
  });
  const problems = ts.getPreEmitDiagnostics(program).concat(program.emit().diagnostics);
  assert.deepEqual(
    problems.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")),
    [],
  );
  return join(folder, "example.js");
}

test("the TypeScript section of docs/clients.md runs as written, and again", async () => {
  const example = project(documented());
  const runs = [1, 2].map(() => execFileSync(process.execPath, [example], { encoding: "utf8" }));
  for (const output of runs) {
    const [recalled, ...rest] = output.split("\n");
    // the line asked about first; whatever else stands out (the stored fact, here) is the recollection gate's to say
    assert.match(recalled ?? "", /^\[ '来週の金曜日、京都で茶道の体験をします。'/);
    assert.deepEqual(rest, ["Aiko lives in Tokyo.", "Noted: Where do I live?", "(end_turn)", "404 not_found", ""]);
  }
  // The second run found Aiko, and stored the conversation and the fact once
  const aiko = await engram().agents.find("Aiko");
  assert.ok(aiko);
  const handedIn = (await engram().messages.list(aiko.id, { include_context: true })).items;
  assert.equal(handedIn.filter((m) => m.content.startsWith("来週の金曜日")).length, 1);
  const facts = await engram().archival.search(aiko.id, "Where does Aiko live?");
  assert.deepEqual(
    facts.map((p) => p.content),
    ["Aiko lives in Tokyo."],
  );
});
