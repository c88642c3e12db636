//! Headless Chromium driven over the DevTools protocol, for the UI tests: evaluate
//! JavaScript in the page, wait for what it renders, take screenshots. Uses Debian's
//! `chromium` (or `CAUSEWAY_CHROMIUM`); nothing is downloaded.

#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// How long one wait for the page may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);

pub struct Chromium {
    child: Child,
    socket: WebSocket<TcpStream>,
    next_id: u64,
    profile: PathBuf,
    /// Uncaught exceptions the page threw, from `Runtime.exceptionThrown`.
    pub exceptions: Vec<String>,
}

fn executable() -> String {
    if let Ok(exe) = std::env::var("CAUSEWAY_CHROMIUM") {
        return exe;
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()));
        if found {
            return name.to_string();
        }
    }
    panic!(
        "the UI tests need headless Chromium: install Debian's `chromium` package \
         (.ci/run does), or set CAUSEWAY_CHROMIUM to a Chromium executable"
    );
}

impl Chromium {
    /// Starts a headless browser with a fresh profile and attaches to its page.
    pub fn launch(name: &str) -> Chromium {
        let profile =
            std::env::temp_dir().join(format!("causeway-chromium-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).unwrap();
        let child = Command::new(executable())
            .args([
                "--headless=new",
                // Containers and CI run as root, where the sandbox cannot start.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--window-size=1400,900",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            // Its scratch directories (org.chromium.Chromium.*) go with the profile.
            .env("TMPDIR", &profile)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromium");
        let port = devtools_port(&profile);
        let page = page_socket_url(port);
        let path = page
            .split_once(&format!("127.0.0.1:{port}"))
            .map(|(_, p)| p.to_string())
            .expect("page socket path");
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to DevTools");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (socket, _) = tungstenite::client(url.as_str(), stream).expect("DevTools handshake");
        let mut browser = Chromium {
            child,
            socket,
            next_id: 0,
            profile,
            exceptions: Vec::new(),
        };
        browser.call("Runtime.enable", json!({}));
        browser.call("Page.enable", json!({}));
        browser
    }

    /// Sends a DevTools command and returns its result, keeping the events it passes.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({ "id": id, "method": method, "params": params });
        self.socket
            .send(Message::text(msg.to_string()))
            .expect("send to DevTools");
        loop {
            let reply = match self.socket.read().expect("read from DevTools") {
                Message::Text(t) => t,
                _ => continue,
            };
            let v: Value = serde_json::from_str(reply.as_str()).expect("DevTools JSON");
            if v["method"] == "Runtime.exceptionThrown" {
                let d = &v["params"]["exceptionDetails"];
                self.exceptions
                    .push(format!("{} {}", d["text"], d["exception"]["description"]));
            }
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    panic!("{method} failed: {e}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Evaluates an expression in the page (awaiting a promise) and returns its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!(
                "{expression}\nthrew: {}",
                e["exception"]["description"].as_str().unwrap_or("?")
            );
        }
        r["result"]["value"].clone()
    }

    /// Loads a URL and waits for the document.
    pub fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
        self.wait_for("document.readyState === 'complete'", "the page to load");
    }

    /// Polls `condition` until it is truthy; fails with `what` and the page's text.
    pub fn wait_for(&mut self, condition: &str, what: &str) -> Value {
        self.wait_for_within(condition, what, WAIT)
    }

    /// [`Chromium::wait_for`], for at most `within`.
    pub fn wait_for_within(&mut self, condition: &str, what: &str, within: Duration) -> Value {
        let start = Instant::now();
        loop {
            let v = self.eval(&format!(
                "(() => {{ try {{ return {condition}; }} catch (e) {{ return null; }} }})()"
            ));
            if !(v.is_null() || v == false || v == "" || v == 0) {
                return v;
            }
            if start.elapsed() > within {
                let text = self.eval("document.getElementById('view')?.innerText.slice(0, 600)");
                panic!("timed out waiting for {what} ({condition}); the page says: {text}");
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Goes to a UI route (`#/...`) and waits until its view has rendered or failed;
    /// returns the final state ("ready", "error").
    pub fn open(&mut self, hash: &str) -> String {
        self.open_within(hash, WAIT)
    }

    /// [`Chromium::open`], waiting at most `within`.
    pub fn open_within(&mut self, hash: &str, within: Duration) -> String {
        self.eval(&format!(
            "document.getElementById('view').dataset.state = 'navigating'; \
             if (location.hash === {0}) window.dispatchEvent(new HashChangeEvent('hashchange')); \
             else location.hash = {0}; true",
            json!(hash)
        ));
        let state = self.wait_for_within(
            "['ready', 'error'].includes(document.getElementById('view').dataset.state) && document.getElementById('view').dataset.state",
            &format!("{hash} to render"),
            within,
        );
        let state = state.as_str().unwrap_or_default().to_string();
        if state == "error" {
            // The caller asserts on the state; the page's words say why it failed.
            let text = self.eval("document.getElementById('view')?.innerText.slice(0, 600)");
            eprintln!("{hash} rendered an error: {text}");
        }
        state
    }

    /// Clicks the first element matching `selector`.
    pub fn click(&mut self, selector: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.click(); return true; }})()",
            json!(selector)
        ));
        assert_eq!(found, true, "nothing to click at {selector}");
    }

    /// Gives the keyboard's focus to the first element matching `selector`.
    pub fn focus(&mut self, selector: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); return true; }})()",
            json!(selector)
        ));
        assert_eq!(found, true, "nothing to focus at {selector}");
    }

    /// Types `text` into the input at `selector` (its value replaced, as by a paste),
    /// focused first, with the `input` event a keystroke fires.
    pub fn type_into(&mut self, selector: &str, text: &str) {
        let found = self.eval(&format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); e.value = {}; e.dispatchEvent(new Event('input', {{ bubbles: true }})); return true; }})()",
            json!(selector),
            json!(text)
        ));
        assert_eq!(found, true, "nothing to type into at {selector}");
    }

    /// Presses a key (`Enter`, `Tab`, ` `) as the keyboard does, on whatever has the focus.
    pub fn press(&mut self, key: &str) {
        let (code, vk) = match key {
            "Enter" => ("Enter", 13),
            "Tab" => ("Tab", 9),
            " " => ("Space", 32),
            "/" => ("Slash", 191),
            "ArrowLeft" => ("ArrowLeft", 37),
            "ArrowUp" => ("ArrowUp", 38),
            "ArrowRight" => ("ArrowRight", 39),
            "ArrowDown" => ("ArrowDown", 40),
            other => panic!("no key code for {other:?}"),
        };
        let text = match key {
            "Enter" => "\r",
            " " | "/" => key,
            _ => "",
        };
        for kind in ["keyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({ "type": kind, "key": key, "code": code, "windowsVirtualKeyCode": vk, "text": if kind == "keyDown" { text } else { "" } }),
            );
        }
    }

    /// The text of the first element matching `selector` ("" when none).
    pub fn text(&mut self, selector: &str) -> String {
        let v = self.eval(&format!(
            "document.querySelector({})?.innerText ?? ''",
            json!(selector)
        ));
        v.as_str().unwrap_or_default().to_string()
    }

    /// How many elements match `selector`.
    pub fn count(&mut self, selector: &str) -> u64 {
        self.eval(&format!(
            "document.querySelectorAll({}).length",
            json!(selector)
        ))
        .as_u64()
        .unwrap_or(0)
    }

    /// Saves a PNG of the page under the target directory's `ui-screenshots/`.
    pub fn screenshot(&mut self, name: &str) -> PathBuf {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("screenshot data"))
            .expect("screenshot base64");
        let dir = target_dir().join("ui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A helper that outlives the browser for a moment (the network service flushing
        // its cache index) can write the profile again after it was removed.
        for _ in 0..20 {
            let _ = std::fs::remove_dir_all(&self.profile);
            std::thread::sleep(Duration::from_millis(100));
            if !self.profile.exists() {
                return;
            }
        }
    }
}

/// The port Chromium chose, from the `DevToolsActivePort` file it writes in its profile.
fn devtools_port(profile: &Path) -> u16 {
    let file = profile.join("DevToolsActivePort");
    let start = Instant::now();
    loop {
        if let Some(port) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()))
        {
            return port;
        }
        assert!(
            start.elapsed() < WAIT,
            "chromium did not open its DevTools port within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The DevTools socket of the browser's first page.
fn page_socket_url(port: u16) -> String {
    let start = Instant::now();
    loop {
        let list: Option<Vec<Value>> = ureq::get(&format!("http://127.0.0.1:{port}/json/list"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_json().ok());
        if let Some(url) = list.iter().flatten().find_map(|t| {
            (t["type"] == "page")
                .then(|| t["webSocketDebuggerUrl"].as_str().map(str::to_string))
                .flatten()
        }) {
            return url;
        }
        assert!(start.elapsed() < WAIT, "chromium opened no page");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `target/` (or CARGO_TARGET_DIR): the test binary lives in its `debug/deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}
