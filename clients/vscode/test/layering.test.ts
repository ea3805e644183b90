// The core (socket client and every command's logic) never imports `vscode`, so it runs under
// node's test runner; the extension layer is the only place that does.
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import { NotificationPresenter, describe as describeNotification, type Message } from "../src/core/notifications";

const CORE = path.resolve(__dirname, "..", "src", "core");

test("no module in src/core imports vscode", () => {
  const files = fs.readdirSync(CORE).filter((f) => f.endsWith(".js"));
  assert.ok(files.length >= 10, `compiled core modules: ${files.join(", ")}`);
  for (const file of files) {
    const text = fs.readFileSync(path.join(CORE, file), "utf8");
    assert.doesNotMatch(text, /require\("vscode"\)/, `${file} imports vscode`);
  }
});

test("each event reads as one line; unknown events are not shown", () => {
  const text = (method: string, params: Record<string, unknown>) => describeNotification({ method, params })?.text;
  assert.equal(text("team/synced", { repo: "acme/widgets", pushed: ["a", "b"], pulled: [] }), "memoryd: team synced acme/widgets (pushed 2, pulled 0)");
  assert.equal(text("worker/error", { worker: "extraction", message: "model timed out" }), "memoryd: extraction failed: model timed out");
  assert.equal(text("session/summary_updated", { session_id: "s1" }), "memoryd: session summary updated (s1)");
  assert.equal(describeNotification({ method: "worker/error", params: {} })?.level, "error");
  assert.equal(describeNotification({ method: "something/new", params: {} }), null);
});

test("the rate limit opens again when the window ends", () => {
  let now = 0;
  const shown: Message[] = [];
  const presenter = new NotificationPresenter((m) => shown.push(m), { perWindow: 2, windowMs: 1000 }, () => now);
  const saved = { method: "memory/saved", params: { path: "/m/a.md" } };
  for (let i = 0; i < 5; i++) {
    presenter.handle(saved);
  }
  assert.equal(shown.length, 2);
  now = 1500;
  presenter.flush();
  assert.match(shown[2]!.text, /3 more notifications not shown/);
  now = 3000;
  presenter.handle(saved);
  assert.equal(shown.length, 4);
  presenter.dispose();
});
