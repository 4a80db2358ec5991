/** The types are generated from openapi.json and committed: regenerating them must change nothing. */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { packageRoot } from "./support.js";

test("src/openapi.ts is what openapi-typescript makes of openapi.json now", () => {
  const check = spawnSync("npm", ["run", "--silent", "generate", "--", "--check"], {
    cwd: fileURLToPath(packageRoot),
    encoding: "utf8",
  });
  assert.equal(
    check.status,
    0,
    `openapi.json changed: run \`npm run generate\` and commit src/openapi.ts\n${check.stderr}`,
  );
});
