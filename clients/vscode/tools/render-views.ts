// Prints what the extension's views and status bar show for a project, as text: the captured
// view in docs/clients.md (VS Code itself does not run here). The lines come from the same
// core functions the tree providers use.
//
//   node out/tools/render-views.js SOCKET FILE
import * as os from "node:os";

import { projectTarget } from "../src/core/editorContext";
import { listMemories, memoriesTree } from "../src/core/memories";
import { recall, recallPicks } from "../src/core/recall";
import { getContext, rulesTree } from "../src/core/rules";
import { MemorydClient } from "../src/core/rpcClient";
import { fetchStatus } from "../src/core/status";
import { renderTree } from "../src/core/viewNode";

async function main(): Promise<void> {
  const [socketPath, file, query] = process.argv.slice(2);
  if (!socketPath || !file) {
    throw new Error("usage: render-views.js SOCKET FILE [QUERY]");
  }
  const client = new MemorydClient({ socketPath, reconnect: false });
  try {
    const target = projectTarget({ filePath: file });
    const home = os.homedir();
    console.log(`RULES IN EFFECT  (active file: ${file})`);
    console.log(renderTree(rulesTree(await getContext(client, target), target, home)).join("\n"));
    console.log("\nMEMORIES");
    console.log(renderTree(memoriesTree(await listMemories(client, target), target, Date.now(), home)).join("\n"));
    if (query) {
      console.log(`\nRECALL "${query}"`);
      for (const pick of recallPicks(await recall(client, target, query, { selector: "local" }))) {
        console.log(`  ${pick.label}  ${pick.description}\n      ${pick.detail}`);
      }
    }
    const status = await fetchStatus(client, target.cwd);
    console.log(`\nSTATUS BAR  ${status.text.replace(/^\$\([a-z-]+\) /, "")}`);
    console.log(status.tooltip.replace(/^/gm, "  "));
  } finally {
    client.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
