//! The web console at `/ui` in a real browser: headless Debian Chromium
//! driven through chromedriver's W3C WebDriver protocol, against the real
//! binary with an admin token set (so every action proves the console
//! carries it). One browser session visits every page: each loads without
//! a browser console error (the browser log is read after each page: a
//! failed request, a script error or a CSP violation would be there), shows
//! the data the test produced over HTTP, and the actions (set the token,
//! create a topic, edit a config, compact, delete, reset a group's
//! offsets, produce) change what the HTTP API then answers. A screenshot
//! of each page goes to `<target>/console-screenshots/` (not committed).
//!
//! The WebDriver calls are plain JSON over HTTP/1.1 to 127.0.0.1
//! ([`driver_call`]; no WebDriver crate: the dozen calls used here are each
//! one request). Every wait is a bounded poll of a condition.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{free_local_addr, TidelogProcess};
use serde_json::{json, Value};
use tidelog_integration_tests::browser::{ensure_chromium, CHROMEDRIVER, CHROMIUM};

const TOKEN: &str = "console-secret";
const AUTH: (&str, &str) = ("Authorization", "Bearer console-secret");

/// Longest any one wait for the page may take (a loaded, shared machine).
const WAIT: Duration = Duration::from_secs(30);

/// The W3C name of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process and one browser session on it; both end on drop.
struct Browser {
    driver: Child,
    addr: SocketAddr,
    session: String,
    profile: tempfile::TempDir,
    screenshots: PathBuf,
}

impl Browser {
    fn start() -> Browser {
        ensure_chromium();
        let addr = free_local_addr();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={}", addr.port()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let profile = tempfile::tempdir().expect("browser profile dir");
        let mut browser = Browser {
            driver,
            addr,
            session: String::new(),
            profile,
            screenshots: tidelog_integration_tests::clients::target_dir()
                .unwrap()
                .join("console-screenshots"),
        };
        std::fs::create_dir_all(&browser.screenshots).unwrap();
        let deadline = Instant::now() + WAIT;
        // Listening first, then ready (chromedriver answers HTTP/1.1 only).
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        while driver_call(addr, "GET", "/status", None).1["value"]["ready"] != true {
            assert!(Instant::now() < deadline, "chromedriver is not ready");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1100",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!(
            "--user-data-dir={}",
            browser.profile.path().display()
        )])
        .collect::<Vec<_>>();
        let session = browser.command(
            "POST",
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
                "goog:loggingPrefs": {"browser": "ALL"},
            }}}),
        );
        browser.session = session["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// One WebDriver command; panics with the driver's error.
    fn command(&self, method: &str, path: &str, body: Value) -> Value {
        let body = body.to_string();
        let (status, value) = driver_call(
            self.addr,
            method,
            path,
            (method != "GET").then_some(body.as_bytes()),
        );
        assert_eq!(status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }

    fn session(&self, method: &str, rest: &str, body: Value) -> Value {
        self.command(method, &format!("/session/{}{rest}", self.session), body)
    }

    fn open(&self, url: &str) {
        self.session("POST", "/url", json!({"url": url}));
    }

    fn script(&self, script: &str) -> Value {
        self.session(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }

    /// Waits until `expression` (JavaScript) is truthy; returns its value.
    fn wait_for(&self, what: &str, expression: &str) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.script(&format!("return ({expression}) || null;"));
            if !value.is_null() && value != json!(false) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {expression}\npage: {}",
                self.script("return document.getElementById('main').innerText;")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Opens `#hash` and waits until that page has rendered.
    fn page(&self, base: &str, hash: &str, page: &str) {
        self.open(&format!("{base}/ui#{hash}"));
        self.wait_for(
            &format!("page {page}"),
            &format!("document.body.dataset.page === '{page}'"),
        );
    }

    fn text(&self, css: &str) -> String {
        let css = serde_json::to_string(css).unwrap();
        self.wait_for(
            &format!("element {css}"),
            &format!("document.querySelector({css}) && document.querySelector({css}).innerText"),
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// Waits until the text of `css` contains `part`.
    fn wait_text(&self, css: &str, part: &str) -> String {
        let (css_js, part_js) = (
            serde_json::to_string(css).unwrap(),
            serde_json::to_string(part).unwrap(),
        );
        self.wait_for(
            &format!("{part:?} in {css}"),
            &format!(
                "document.querySelector({css_js}) && document.querySelector({css_js}).innerText.includes({part_js}) && document.querySelector({css_js}).innerText"
            ),
        )
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    fn element(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let css_js = serde_json::to_string(css).unwrap();
            if self
                .script(&format!("return !!document.querySelector({css_js});"))
                .as_bool()
                == Some(true)
            {
                let found = self.session(
                    "POST",
                    "/element",
                    json!({"using": "css selector", "value": css}),
                );
                return found[ELEMENT]
                    .as_str()
                    .unwrap_or_else(|| panic!("{css}: no element reference in {found}"))
                    .to_string();
            }
            assert!(Instant::now() < deadline, "no element {css}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.session("POST", &format!("/element/{id}/click"), json!({}));
    }

    /// Replaces the text of an input with `text`, typed.
    fn fill(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.session("POST", &format!("/element/{id}/clear"), json!({}));
        self.session(
            "POST",
            &format!("/element/{id}/value"),
            json!({"text": text}),
        );
    }

    /// Picks `value` in a `<select>` by clicking its option.
    fn choose(&self, select: &str, value: &str) {
        self.click(&format!("{select} option[value=\"{value}\"]"));
    }

    /// Saves a screenshot as `<name>.png`.
    fn screenshot(&self, name: &str) {
        let png = self.session("GET", "/screenshot", Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(self.screenshots.join(format!("{name}.png")), bytes).unwrap();
    }

    /// Asserts the browser logged no error since the last call (the log
    /// is drained as it is read).
    fn assert_no_console_errors(&self, page: &str) {
        let entries = self.session("POST", "/se/log", json!({"type": "browser"}));
        let errors: Vec<&Value> = entries
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .collect();
        assert!(errors.is_empty(), "console errors on {page}: {errors:#?}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Quits the browser; chromedriver would leave it running.
            let session = format!("/session/{}", self.session);
            let _ = std::panic::catch_unwind(|| driver_call(self.addr, "DELETE", &session, None));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// One request to chromedriver: its status and JSON body. chromedriver
/// keeps the connection open after answering, whatever `Connection:
/// close` says, so the answer is read by its `Content-Length`, not to the
/// end of the stream as the harness's `http` does.
fn driver_call(addr: SocketAddr, method: &str, path: &str, body: Option<&[u8]>) -> (u16, Value) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)
        .unwrap_or_else(|e| panic!("connect chromedriver {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let body = body.unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: bad status line {line:?}"));
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut answer = vec![0u8; length];
    reader.read_exact(&mut answer).unwrap();
    let value = serde_json::from_slice(&answer).unwrap_or_else(|e| {
        panic!(
            "{method} {path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&answer)
        )
    });
    (status, value)
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Polls `GET path` until `done(answer)` (bounded).
fn wait_api(server: &TidelogProcess, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = server.get(path).expect(200);
        if done(&answer) {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never got there: {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn post(server: &TidelogProcess, path: &str, content_type: &str, body: Value) -> Value {
    let body = body.to_string();
    let answer = server.request(
        "POST",
        path,
        &[("Content-Type", content_type), AUTH],
        Some(body.as_bytes()),
    );
    assert!(
        (200..300).contains(&answer.status),
        "POST {path}: {}",
        answer.text()
    );
    if answer.body.is_empty() {
        Value::Null
    } else {
        answer.json()
    }
}

/// The offset in the first row of the records table (JavaScript).
const FIRST_OFFSET: &str = "document.querySelector('#records-table tbody tr') && document.querySelector('#records-table tbody tr').cells[0].innerText";

const BIN: &str = "application/vnd.kafka.binary.v2+json";
const TOPICS: &str = "/v3/clusters/tidelog/topics";

/// What the pages should show: two topics, records of every kind, a group.
fn produce_test_data(server: &TidelogProcess) -> u64 {
    for (name, partitions, policy) in [("events", 2, "delete"), ("users", 1, "compact")] {
        post(
            server,
            TOPICS,
            "application/json",
            json!({"topic_name": name, "partitions_count": partitions,
                   "configs": [{"name": "cleanup.policy", "value": policy}]}),
        );
    }
    // Partition 0 of events: a JSON value, a text value, a binary value
    // (not UTF-8), a value with markup (shown as text, never parsed), and
    // a header; times a minute apart, from a fixed past instant.
    let base_ms: i64 = 1_700_000_000_000;
    let values = [
        b64(r#"{"clicks":3,"page":"/home"}"#),
        b64("plain text"),
        base64::engine::general_purpose::STANDARD.encode([0xff, 0x00, 0xfe]),
        b64("<img src=x onerror=alert(1)>"),
    ];
    let records: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"key": b64(&format!("user-{i}")), "value": v, "partition": 0,
                   "timestamp": base_ms + 60_000 * i as i64,
                   "headers": [{"name": "trace", "value": b64("t-1")}]})
        })
        .collect();
    post(server, "/topics/events", BIN, json!({"records": records}));
    // Several values per key on the compact topic.
    let users: Vec<Value> = (0..9)
        .map(|i| json!({"key": b64(&format!("u{}", i % 3)), "value": b64(&format!("v{i}"))}))
        .collect();
    post(server, "/topics/users", BIN, json!({"records": users}));
    // A group with a commit behind the end of events/0, no members.
    post(
        server,
        "/consumer-groups/billing/offsets",
        "application/json",
        json!({"offsets": [{"topic": "events", "partition": 0, "offset": 1}]}),
    );
    wait_api(server, "/topics/events/partitions/0/offsets", |a| {
        a["end_offset"] == 4
    });
    wait_api(server, "/topics/users/partitions/0/offsets", |a| {
        a["end_offset"] == 9
    });
    base_ms as u64
}

#[test]
fn every_console_page_renders_the_servers_data_and_its_actions_reach_the_api() {
    // Tiers near 100 %: how full this shared machine's disk is must not
    // refuse the test's writes (the page shows whatever tiers are set).
    let config = format!(
        "{}retention:\n  disk_max_used_ratio: 0.97\n  disk_force_clean_ratio: 0.98\n  disk_full_ratio: 0.99\nadmin_token: {TOKEN}\n",
        common::SMALL_STORE
    );
    let server = TidelogProcess::start_with_config(&config);
    let base = server.url();
    let base_ms = produce_test_data(&server);
    // The plots start from the server's samples: wait for two (4 s).
    wait_api(&server, "/v3/clusters/tidelog/stats/history", |a| {
        a["samples"].as_array().is_some_and(|s| s.len() >= 2)
    });
    let browser = Browser::start();

    // Overview: readiness, the cluster, figures, three plots and the disk
    // gauge.
    browser.page(&base, "/", "overview");
    assert_eq!(browser.text("#ready"), "ready");
    let figures = browser.text("#overview-figures");
    assert!(figures.contains("CommitLog segments"), "{figures}");
    // A single node (GET /v1/cluster: epoch 0, one master): one figure,
    // no nodes table.
    assert_eq!(browser.text("#cluster-summary"), "single node");
    assert_eq!(
        browser.script("return document.querySelectorAll('#cluster-nodes').length;"),
        json!(0)
    );
    let charts =
        browser.script("return document.querySelectorAll('svg.chart path.series').length;");
    assert!(charts.as_u64().unwrap() >= 3, "plots with data: {charts}");
    assert_eq!(
        browser.script("return document.querySelectorAll('svg.gauge line.tier').length;"),
        json!(3)
    );
    browser.screenshot("overview");
    browser.assert_no_console_errors("overview");

    // The token, for every mutating action below.
    browser.fill("#token", TOKEN);
    browser.click("#token-save");
    browser.wait_text("#token-state", "token set");

    // Topics: both topics with their records; create one from the form.
    browser.page(&base, "/topics", "topics");
    let table = browser.wait_text("#topics-table", "events");
    assert!(
        table.contains("users") && table.contains("compact"),
        "{table}"
    );
    let events_row = browser.script(
        "return [...document.querySelectorAll('#topics-table tbody tr')].find(r => r.cells[0].innerText === 'events').innerText;",
    );
    assert!(
        events_row.as_str().unwrap().contains("0: 0–4"),
        "{events_row}"
    );
    browser.fill("#create-name", "orders");
    browser.fill("#create-partitions", "3");
    browser.click("#create-submit");
    browser.wait_text("#topics-table", "orders");
    let orders = server.get(&format!("{TOPICS}/orders")).expect(200);
    assert_eq!(orders["partitions_count"], 3);
    browser.screenshot("topics");
    browser.assert_no_console_errors("topics");

    // A topic: edit a config, compact, see the result.
    browser.page(&base, "/topic/users", "topic");
    browser.wait_text("#partitions-table", "9");
    browser.fill("input[data-config=\"min.cleanable.dirty.ratio\"]", "0.3");
    browser.click("button[data-set=\"min.cleanable.dirty.ratio\"]");
    let configs = wait_api(&server, &format!("{TOPICS}/users/configs"), |a| {
        a["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "min.cleanable.dirty.ratio" && c["value"] == "0.3")
    });
    assert!(
        configs.to_string().contains("\"default\":\"0.5\""),
        "{configs}"
    );
    browser.wait_for(
        "the page to reload with the override",
        "document.querySelector('button[data-reset=\"min.cleanable.dirty.ratio\"]')",
    );
    browser.click("#compact");
    let result = browser.wait_text("#compact-table", "true");
    assert!(result.contains("Records kept"), "{result}");
    let status = server
        .get(&format!("{TOPICS}/users/compaction"))
        .expect(200);
    assert!(
        status["partitions"][0]["runs"].as_u64().unwrap() >= 1,
        "{status}"
    );
    let kept: Vec<Value> = server
        .get_with(
            "/topics/users/partitions/0/records?offset=0&timeout=0",
            &[("Accept", BIN)],
        )
        .expect(200)
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        kept.len(),
        3,
        "one record per key after the compaction: {kept:?}"
    );
    browser.screenshot("topic");
    browser.assert_no_console_errors("topic");

    // Delete a topic from its page.
    browser.page(&base, "/topic/orders", "topic");
    browser.fill("#delete-confirm", "orders");
    browser.click("#delete");
    browser.wait_for("the topics page", "document.body.dataset.page === 'topics'");
    server
        .get(&format!("{TOPICS}/orders"))
        .expect_error(404, 40401);
    browser.assert_no_console_errors("topic delete");

    // Messages: oldest first, newest first, from a timestamp; payloads as
    // JSON, text, hex; markup shown as text; headers; dates.
    browser.page(&base, "/browse/events/0", "browse");
    let records = browser.wait_text("#records-table", "user-0");
    assert!(
        records.contains("\"clicks\": 3"),
        "JSON pretty-printed: {records}"
    );
    assert!(records.contains("plain text"), "{records}");
    assert!(
        records.contains("ff 00 fe"),
        "hex of a binary value: {records}"
    );
    assert!(
        records.contains("<img src=x onerror=alert(1)>"),
        "{records}"
    );
    assert!(
        records.contains("2023-11-14T22:13:20.000Z"),
        "dates: {records}"
    );
    assert!(records.contains("trace"), "headers: {records}");
    assert_eq!(
        browser.script("return document.querySelectorAll('#records-table img').length;"),
        json!(0),
        "a value's markup became an element"
    );
    browser.wait_for("oldest first", &format!("{FIRST_OFFSET} === '0'"));
    browser.choose("#browse-order", "newest");
    browser.click("#browse-load");
    browser.wait_for("newest first", &format!("{FIRST_OFFSET} === '3'"));
    browser.choose("#browse-mode", "timestamp");
    browser.fill("#browse-from", &(base_ms + 120_000).to_string());
    browser.choose("#browse-order", "oldest");
    browser.click("#browse-load");
    browser.wait_for(
        "from the timestamp's offset",
        &format!("{FIRST_OFFSET} === '2'"),
    );
    // Search by key through the IndexFile, then open the record it found
    // by its physical offset.
    browser.fill("#search-key", "user-1");
    browser.click("#search");
    let found = browser.wait_text("#search-result", "plain text");
    assert!(found.contains("1 records with this key"), "{found}");
    let physical = server
        .get(&format!(
            "/topics/events/records?format=binary&key={}",
            b64("user-1")
        ))
        .expect(200)[0]["physical_offset"]
        .as_u64()
        .unwrap();
    browser.fill("#physical-offset", &physical.to_string());
    browser.click("#physical");
    let opened = browser.wait_text("#physical-result", "topic events");
    assert!(opened.contains("plain text"), "{opened}");
    browser.screenshot("browse");
    browser.assert_no_console_errors("browse");

    // Consumer groups: the list, a group's lag, a reset to the beginning.
    browser.page(&base, "/groups", "groups");
    browser.wait_text("#groups-table", "billing");
    browser.screenshot("groups");
    browser.assert_no_console_errors("groups");
    browser.page(&base, "/group/billing", "group");
    let page = browser.text("#main");
    assert!(
        !page.contains("null"),
        "a missing section shown as text: {page}"
    );
    let offsets = browser.text("#offsets-table");
    assert!(
        offsets.contains("events\t0\t1\t4\t3"),
        "committed 1, end 4, lag 3: {offsets}"
    );
    browser.choose("#reset-to", "beginning");
    browser.click("#reset");
    // Every partition of the group's topics: events 0 and 1.
    browser.wait_text("#reset-result", "reset 2 offsets");
    let group = wait_api(&server, "/consumer-groups/billing", |g| {
        g["offsets"][0]["offset"] == 0
    });
    assert_eq!(group["offsets"][0]["lag"], 4);
    browser.wait_text("#offsets-table", "events\t0\t0\t4\t4");
    browser.screenshot("group");
    browser.assert_no_console_errors("group");

    // Produce a record from the form; the API then serves it.
    browser.page(&base, "/produce", "produce");
    browser.choose("#produce-topic", "events");
    browser.fill("#produce-partition", "1");
    browser.fill("#produce-key", "from-the-console");
    browser.fill("#produce-value", "{\"hello\":\"console\"}");
    browser.fill("#produce-headers", "source: ui");
    browser.click("#produce");
    browser.wait_text("#produced", "partition 1 at offset 0");
    let produced = server
        .get_with(
            "/topics/events/partitions/1/records?offset=0&timeout=10000",
            &[("Accept", BIN)],
        )
        .expect(200);
    assert_eq!(produced[0]["key"], b64("from-the-console"));
    assert_eq!(produced[0]["value"], b64("{\"hello\":\"console\"}"));
    assert_eq!(produced[0]["headers"][0]["value"], b64("ui"));
    browser.screenshot("produce");
    browser.assert_no_console_errors("produce");
}

/// A server that requires logins: the console asks for one with its own
/// form (no browser prompt), then shows only what that user may see.
#[test]
fn the_console_asks_for_a_login_and_shows_only_what_the_user_may_see() {
    let dir = tempfile::tempdir().expect("temp dir");
    let password_file = dir.path().join("admin.password");
    std::fs::write(&password_file, "admin-secret").expect("write the password file");
    let config = format!(
        "{}{}security:\n  authentication: true\n  authorization: true\n  super_users: [admin]\n  users:\n    - name: admin\n      password_file: {}\n",
        common::SMALL_STORE,
        common::DISK_RATIOS_OFF,
        password_file.display()
    );
    let server = TidelogProcess::start_with_config(&config);
    let base = server.url();
    let admin = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("admin:admin-secret")
    );
    let as_admin = |method: &str, path: &str, body: Value| {
        let body = body.to_string();
        server.request(
            method,
            path,
            &[
                ("Authorization", admin.as_str()),
                ("Content-Type", "application/json"),
            ],
            Some(body.as_bytes()),
        )
    };
    for topic in ["visible", "hidden"] {
        as_admin(
            "POST",
            "/v3/clusters/tidelog/topics",
            json!({"topic_name": topic, "partitions_count": 1}),
        )
        .expect(201);
    }
    as_admin(
        "POST",
        "/v1/security/users",
        json!({"username": "viewer", "password": "viewer-pw"}),
    )
    .expect(201);
    as_admin(
        "POST",
        "/v3/clusters/tidelog/acls",
        json!({"resource_type": "TOPIC", "resource_name": "visible", "pattern_type": "LITERAL",
               "principal": "User:viewer", "host": "*", "operation": "DESCRIBE", "permission": "ALLOW"}),
    )
    .expect(201);

    let browser = Browser::start();
    browser.open(&format!("{base}/ui#/topics"));
    browser.wait_text("#login-state", "this server needs a login");
    browser.screenshot("login-required");
    browser.fill("#login-user", "viewer");
    browser.fill("#login-password", "viewer-pw");
    browser.click("#login-save");
    browser.wait_text("#login-state", "logged in as viewer");
    let table = browser.wait_text("#topics-table", "visible");
    assert!(
        !table.contains("hidden"),
        "a topic viewer may not describe: {table}"
    );
    browser.screenshot("logged-in");

    // A wrong password is refused with the form, not a browser prompt.
    browser.fill("#login-user", "viewer");
    browser.fill("#login-password", "wrong");
    browser.click("#login-save");
    browser.wait_text("#login-state", "login refused");
}
