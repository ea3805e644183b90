// Driven by bench/bench_editors.py: in one long-lived node process, time N `get_context` round
// trips through the extension's socket client (encode, socket, decode, promise), and N builds of
// the Rules in Effect view (the call plus the tree). Prints {"round_trip": [ms…], "rules_view": [ms…]}.
//
//   node out/tools/bench-get-context.js SOCKET CWD TOUCHED_PATH RUNS
import { performance } from "node:perf_hooks";

import { getContext, rulesTree } from "../src/core/rules";
import { MemorydClient } from "../src/core/rpcClient";

async function main(): Promise<void> {
  const [socketPath, cwd, touched, runsText] = process.argv.slice(2);
  if (!socketPath || !cwd || !touched) {
    throw new Error("usage: bench-get-context.js SOCKET CWD TOUCHED_PATH RUNS");
  }
  const runs = Number(runsText ?? "200");
  const target = { cwd, touchedPaths: [touched] };
  const client = new MemorydClient({ socketPath, timeoutMs: 30_000, reconnect: false });
  try {
    for (let i = 0; i < 10; i++) {
      rulesTree(await getContext(client, target), target); // warm: connection, JIT
    }
    const roundTrip: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      await getContext(client, target);
      roundTrip.push(performance.now() - start);
    }
    const rulesView: number[] = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      rulesTree(await getContext(client, target), target);
      rulesView.push(performance.now() - start);
    }
    process.stdout.write(JSON.stringify({ round_trip: roundTrip, rules_view: rulesView }) + "\n");
  } finally {
    client.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
