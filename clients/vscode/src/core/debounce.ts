// A refresh asked for again and again (memory/saved, team/synced, editor switches, saves).

/** The longest a refresh waits while asks keep coming: the views catch up at least this often. */
export const MAX_REFRESH_WAIT_MS = 1000;

/**
 * `run` once `delayMs` after the last ask, and at the latest `maxWaitMs` after the first ask it
 * has not served yet. A plain debounce was pushed back for as long as asks kept coming closer
 * than its delay (an extraction saving a memory every 200 ms): the views never refreshed.
 */
export class Debounce {
  private timer: NodeJS.Timeout | undefined;
  private firstAskAt: number | undefined;

  constructor(
    private readonly run: () => void,
    private readonly maxWaitMs = MAX_REFRESH_WAIT_MS,
  ) {}

  ask(delayMs: number): void {
    const now = performance.now(); // not Date.now(): a clock set back would hold the refresh
    this.firstAskAt ??= now;
    const wait = Math.max(0, Math.min(delayMs, this.firstAskAt + this.maxWaitMs - now));
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.firstAskAt = undefined;
      this.run();
    }, wait);
  }

  dispose(): void {
    if (this.timer) {
      clearTimeout(this.timer);
    }
    this.timer = undefined;
    this.firstAskAt = undefined;
  }
}
