// Small DOM helpers. Every piece of data goes into the page as text (textContent), never as HTML.

const PROPERTIES = new Set(["value", "checked", "disabled", "hidden", "open", "selected"]);

/** h("button", {class: "x", onclick: f}, "text", child, [more]) — an element with attributes and children. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (PROPERTIES.has(key)) el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Characters as the service counts them (Python's len: code points, not UTF-16 units). */
export function charCount(text) {
  let count = 0;
  for (const _ of text) count++;
  return count;
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function shortId(id) {
  return id ? String(id).slice(0, 8) : "";
}

/** What went wrong, for a status line: the API's `detail` when there is one. */
export function problem(error) {
  if (error?.detail) return `${error.detail} (${error.status})`;
  return error?.message ?? String(error);
}

/** A status line: role=status, so screen readers hear it; `kind` is "ok", "error" or "" (neutral). */
export function say(el, text, kind = "") {
  el.textContent = text;
  el.dataset.kind = kind;
}

/** The modal confirmation dialog of the page; resolves true when the admin confirms. */
export function confirmDialog(title, body, action) {
  const dialog = document.getElementById("confirm");
  fill(dialog.querySelector("h2"), title);
  fill(dialog.querySelector("p"), body);
  fill(dialog.querySelector("button[value=yes]"), action);
  dialog.returnValue = "";
  dialog.showModal();
  dialog.querySelector("button[value=no]").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
  });
}
