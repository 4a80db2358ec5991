// A word-level diff (Myers' O(ND) algorithm) for block history and 412 conflicts. Latin words and numbers are
// tokens; each CJK character is a token of its own (Japanese has no spaces to split on).

import { h } from "./dom.js";

const TOKENS = /\s+|(?:(?![\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}])[\p{L}\p{N}_])+|./gsu;
const MAX_EDITS = 2000; // beyond this, the old text out and the new text in: cheaper and just as readable

export function tokenize(text) {
  return text.match(TOKENS) ?? [];
}

/** [{op: "=" | "-" | "+", text}] turning `before` into `after`, with neighbouring pieces of one kind merged. */
export function diff(before, after) {
  const a = tokenize(before);
  const b = tokenize(after);
  const edits = myers(a, b);
  const pieces = [];
  for (const [op, token] of edits ?? [...a.map((t) => ["-", t]), ...b.map((t) => ["+", t])]) {
    const last = pieces[pieces.length - 1];
    if (last && last.op === op) last.text += token;
    else pieces.push({ op, text: token });
  }
  return pieces;
}

function myers(a, b) {
  const n = a.length;
  const m = b.length;
  const offset = n + m + 1;
  const v = new Int32Array(2 * offset + 1);
  const trace = []; // trace[d]: the furthest x on each diagonal before step d (only the diagonals step d reads)
  for (let d = 0; d <= Math.min(n + m, MAX_EDITS); d++) {
    trace.push({ low: -d - 1, xs: v.slice(offset - d - 1, offset + d + 2) });
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b);
    }
  }
  return null;
}

function backtrack(trace, a, b) {
  const edits = [];
  let x = a.length;
  let y = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const { low, xs } = trace[d];
    const at = (k) => xs[k - low];
    const k = x - y;
    const previousK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
    const previousX = at(previousK);
    const previousY = previousX - previousK;
    while (x > previousX && y > previousY) {
      x--;
      y--;
      edits.push(["=", a[x]]);
    }
    if (d > 0) edits.push(x === previousX ? ["+", b[previousY]] : ["-", a[previousX]]);
    x = previousX;
    y = previousY;
  }
  return edits.reverse();
}

/** The diff as an element: deletions struck through, insertions underlined (also told apart without colour). */
export function diffView(before, after) {
  const pieces = diff(before, after);
  const changed = pieces.some((p) => p.op !== "=");
  return h(
    "div",
    { class: "diff", "aria-label": "changes" },
    changed
      ? pieces.map((p) =>
          p.op === "=" ? p.text : h(p.op === "+" ? "ins" : "del", { title: p.op === "+" ? "added" : "removed" }, p.text),
        )
      : h("span", { class: "muted" }, "no change"),
  );
}
