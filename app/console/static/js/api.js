// The JSON API on the same origin. The API key lives in sessionStorage (this tab, until it closes) and goes out
// only as `Authorization: Bearer` — never in a URL.

const STORAGE_KEY = "engram.apiKey";
// The console is served at <root>/console/, the API at <root>/v1/...: relative, so a path prefix works too.
export const apiRoot = new URL("../", document.baseURI);

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.detail ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error ?? "http_error";
    this.detail = body?.detail ?? null;
  }
}

export const apiKey = {
  get: () => sessionStorage.getItem(STORAGE_KEY),
  set: (key) => sessionStorage.setItem(STORAGE_KEY, key),
  clear: () => sessionStorage.removeItem(STORAGE_KEY),
};

/** Build a /v1 URL: agent("…", "memory", label) segments are escaped; query values that are empty are left out. */
export function url(segments, query = {}) {
  const path = segments.map((s) => encodeURIComponent(s)).join("/");
  const result = new URL(`v1/${path}`, apiRoot);
  for (const [name, value] of Object.entries(query)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (item !== undefined && item !== null && item !== "") result.searchParams.append(name, String(item));
    }
  }
  return result;
}

/** One API call; resolves to the parsed JSON (null for 204), rejects with an ApiError. */
export async function call(method, segments, { query, body, headers } = {}) {
  const sent = { Accept: "application/json", ...headers };
  const key = apiKey.get();
  if (key) sent.Authorization = `Bearer ${key}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const response = await fetch(url(segments, query), {
    method,
    headers: sent,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new ApiError(response.status, data);
    if (response.status === 401) window.dispatchEvent(new CustomEvent("engram:unauthorized", { detail: error }));
    throw error;
  }
  return data;
}

export function socketUrl(agentId) {
  const result = url(["agents", agentId, "ws"]);
  result.protocol = result.protocol === "https:" ? "wss:" : "ws:";
  return result;
}
