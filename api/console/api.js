// The console's only way out: tidelog's own HTTP API, same origin (the
// CSP's connect-src 'self' allows nothing else). With a user logged in,
// every call carries its HTTP Basic credentials (the server then shows
// only what that user may see); else mutating calls carry the admin
// token when the operator entered one. Both live in sessionStorage, so
// they are gone when the tab closes and are never sent anywhere else.

const TOKEN_KEY = "tidelog.adminToken";
const LOGIN_KEY = "tidelog.login";

/** The user logged in on this tab, or "". */
export function user() {
  const login = sessionStorage.getItem(LOGIN_KEY);
  return login ? atob(login).split(":")[0] : "";
}

/** Logs in as `name` (checked by the next call); empty logs out. */
export function setLogin(name, password) {
  if (name) {
    // btoa takes Latin-1: encode UTF-8 first.
    const bytes = new TextEncoder().encode(`${name}:${password}`);
    sessionStorage.setItem(LOGIN_KEY, btoa(String.fromCharCode(...bytes)));
  } else {
    sessionStorage.removeItem(LOGIN_KEY);
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

/** An answer that was not 2xx: the server's error_code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code ?? ""}: ${message}`);
    this.status = status;
    this.code = code;
    this.serverMessage = message;
  }
}

const BINARY = "application/vnd.kafka.binary.v2+json";

/**
 * One call. `body` (an object) is sent as JSON with `contentType`; the
 * answer is parsed JSON, or null for an empty one (204).
 */
export async function call(method, path, { body, contentType, accept } = {}) {
  // Marks the console's calls: a 401 then carries no WWW-Authenticate,
  // so the browser shows the console's login form, not its own prompt.
  const headers = { Accept: accept || "application/json", "X-Requested-With": "tidelog-console" };
  const login = sessionStorage.getItem(LOGIN_KEY);
  if (login) {
    headers.Authorization = `Basic ${login}`;
  } else if (method !== "GET" && token()) {
    headers.Authorization = `Bearer ${token()}`;
  }
  let payload;
  if (body !== undefined) {
    headers["Content-Type"] = contentType || "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(path, { method, headers, body: payload, cache: "no-store" });
  const text = await response.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = { message: text };
    }
  }
  if (response.status === 401) {
    window.dispatchEvent(new CustomEvent("tidelog:login-required"));
  }
  if (!response.ok) {
    throw new ApiError(response.status, parsed && parsed.error_code, (parsed && parsed.message) || response.statusText);
  }
  return parsed;
}

export const get = (path, options) => call("GET", path, options);

let clusterId;

/** The one cluster's id, for the v3 routes. */
export async function cluster() {
  if (!clusterId) {
    const answer = await get("/v3/clusters");
    clusterId = answer.data[0].cluster_id;
  }
  return clusterId;
}

export async function v3(method, rest, options) {
  return call(method, `/v3/clusters/${encodeURIComponent(await cluster())}${rest}`, options);
}

export const seg = encodeURIComponent;

/** Records of one partition from `offset`, keys and values as base64. */
export function fetchRecords(topic, partition, offset, maxRecords) {
  return get(
    `/topics/${seg(topic)}/partitions/${partition}/records?offset=${offset}&max_records=${maxRecords}&timeout=0`,
    { accept: BINARY },
  );
}

export function offsets(topic, partition, timestamp) {
  const query = timestamp === undefined ? "" : `?timestamp=${timestamp}`;
  return get(`/topics/${seg(topic)}/partitions/${partition}/offsets${query}`);
}

export function queryByKey(topic, keyBase64, maxRecords) {
  return get(
    `/topics/${seg(topic)}/records?format=binary&key=${seg(keyBase64)}&max_records=${maxRecords}`,
  );
}

export function readPhysical(position) {
  return get(`/commitlog/${position}`, { accept: BINARY });
}

export function produce(topic, partition, record) {
  const path = partition === null
    ? `/topics/${seg(topic)}`
    : `/topics/${seg(topic)}/partitions/${partition}`;
  return call("POST", path, { body: { records: [record] }, contentType: BINARY });
}
