//! The fakes: a measurer over a synthetic S landscape (compile jobs, shapes, profiles and a
//! failing worker too), an in-memory sink, and a scripted HTTP server on loopback speaking the
//! OpenAI and Anthropic streaming formats.

use super::*;

/// S as a function of the defines: optimum at BLOCK=512, VEC=4 (0.9); the fixture's start
/// (128, 1) gives 0.6. `flat` makes every configuration equal (no improvement ever).
fn landscape(src: &str, flat: bool) -> Option<f64> {
    let p = crate::contract::plan::parse(src).ok()?;
    if flat {
        return Some(0.5);
    }
    let b = p.defines.get("BLOCK")?.as_f64()?;
    let v = p.defines.get("VEC")?.as_f64()?;
    Some(0.9 - 0.1 * (b / 512.0).log2().abs() - 0.05 * (v / 4.0).log2().abs())
}

#[derive(Default)]
pub(super) struct FakeMeasurer {
    pub(super) flat: bool,
    /// (source, kind, mode) of every job.
    pub(super) jobs: Arc<Mutex<Vec<(String, JobKind, Mode)>>>,
    /// Sources that fail to compile.
    pub(super) broken: Option<String>,
    /// How long each job takes (GPU budgets).
    pub(super) delay: Duration,
    /// Between `hold` and `release` (the A B B A runs on one worker).
    pub(super) held: bool,
    /// Holds so far, and timing jobs run while nothing was held.
    pub(super) holds: Arc<std::sync::atomic::AtomicUsize>,
    pub(super) timed_unheld: Arc<std::sync::atomic::AtomicUsize>,
}

/// A source that makes the worker fail (a tool that fails).
pub(super) const WORKER_LOST: &str = "// WORKER-LOST";
/// A source whose profile finds no profiler.
pub(super) const NO_NCU: &str = "// NO-NCU";
/// A source whose jobs fail with a worker message of about 5 MB (multi-byte characters too).
pub(super) const HUGE_ERROR: &str = "// HUGE-ERROR";

fn result(shape: u32, s: f64, kind: JobKind, mode: Mode) -> ShapeResult {
    let sol_ms = 0.01;
    ShapeResult {
        shape,
        verdict: if kind == JobKind::Time {
            Verdict::Unchecked
        } else {
            Verdict::Pass
        },
        checks: vec![],
        bench_ok: true,
        strict_ok: kind != JobKind::Time,
        seeds_checked: if mode == Mode::Full { 5 } else { 1 },
        timing: Some(TimingStats {
            median_ms: sol_ms / s,
            min_ms: sol_ms / s,
            mean_ms: sol_ms / s,
            p20_ms: sol_ms / s,
            p80_ms: sol_ms / s,
            rel_iqr: 0.004,
            n: 30,
            quick: mode == Mode::Quick,
            sm_clock_mhz: None,
            outliers: 0,
            max_ms: None,
            checked: 0,
        }),
        sol_ms,
        s: Some(s),
        message: None,
        device: None,
        worker: None,
    }
}

fn worker(e: Event) -> crate::contract::runner::JobEvent {
    crate::contract::runner::JobEvent::Worker(e)
}

fn done(verdict: Verdict, message: Option<&str>) -> crate::contract::runner::JobEvent {
    worker(Event::Done {
        id: 1,
        verdict,
        message: message.map(|m| m.to_string()),
    })
}

impl Measurer for FakeMeasurer {
    async fn run_shapes(
        &mut self,
        source: &str,
        kind: JobKind,
        mode: Mode,
        shapes: &[u32],
    ) -> Outcome {
        let mut o = self.run(source, kind, mode).await;
        o.shapes.retain(|r| shapes.contains(&r.shape));
        o
    }

    async fn profile(
        &mut self,
        source: &str,
        shape: u32,
    ) -> Result<crate::profile::Profile, ProfileFailure> {
        self.jobs
            .lock()
            .unwrap()
            .push((source.to_string(), JobKind::Time, Mode::Quick));
        tokio::time::sleep(self.delay).await;
        if source.contains(NO_NCU) {
            return Err(crate::profile::ProfileError::NoNcu.into());
        }
        Ok(crate::profile::fixture("rms_norm", 0, shape))
    }

    async fn hold(&mut self) -> Result<String, crate::pool::PoolError> {
        assert!(!self.held, "hold while held");
        self.held = true;
        self.holds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok("fake:0".into())
    }

    fn release(&mut self) {
        self.held = false;
    }

    async fn run(&mut self, source: &str, kind: JobKind, mode: Mode) -> Outcome {
        if kind == JobKind::Time && !self.held {
            self.timed_unheld
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.jobs
            .lock()
            .unwrap()
            .push((source.to_string(), kind, mode));
        tokio::time::sleep(self.delay).await;
        let compiled = |ok: bool| Event::Compiled {
            id: 1,
            which: "candidate".into(),
            ok,
            cached: false,
            ms: 1.0,
            diagnostics: if ok {
                vec![]
            } else {
                vec![crate::contract::protocol::Diagnostic {
                    line: 12,
                    severity: "error".into(),
                    msg: "identifier \"broken\" is undefined".into(),
                }]
            },
            log: String::new(),
            resources: [(
                "k".to_string(),
                crate::contract::protocol::KernelResources {
                    registers: 32,
                    static_smem: 0,
                    local_bytes: 0,
                    max_threads: 1024,
                },
            )]
            .into_iter()
            .collect(),
        };
        if source.contains(HUGE_ERROR) {
            return Outcome::failed(format!(
                "the worker exited: {}",
                "é log line\n".repeat(420_000)
            ));
        }
        if source.contains(WORKER_LOST) {
            return Outcome::failed("the worker exited (signal 9) and was restarted".into());
        }
        if self.broken.as_deref().is_some_and(|b| source.contains(b)) {
            return Outcome::from_events([
                worker(compiled(false)),
                done(Verdict::CompileError, Some("error: broken")),
            ]);
        }
        if kind == JobKind::Compile {
            return Outcome::from_events([worker(compiled(true)), done(Verdict::Pass, None)]);
        }
        // Sources without the fixture's plan (LLM proposals): S from a marker comment.
        let s = landscape(source, self.flat).or_else(|| {
            source
                .lines()
                .rev()
                .find_map(|l| l.trim().strip_prefix("// S=").and_then(|x| x.parse().ok()))
        });
        let Some(s) = s else {
            return Outcome::from_events([
                worker(compiled(true)),
                done(Verdict::Error, Some("unmeasurable fixture")),
            ]);
        };
        let mut shapes: Vec<ShapeResult> = (0..3).map(|i| result(i, s, kind, mode)).collect();
        // A kernel that behaves during the check and cheats when timed: the harness catches
        // its timed runs (see worker::time_shape).
        if kind == JobKind::Time && source.contains("// TIMED-CHEAT") {
            shapes[1].verdict = Verdict::Incorrect;
            shapes[1].s = None;
            shapes[1].message =
                Some("output of a timed run differs from the check: `out` ...".into());
        }
        let mut events = vec![worker(compiled(true))];
        if source.contains("printf") {
            events.push(worker(Event::Output {
                id: 1,
                shape: Some(0),
                text: "row 0: sum 1.5".into(),
                dropped: 0,
            }));
        }
        events.extend(
            shapes
                .into_iter()
                .map(|result| worker(Event::ShapeDone { id: 1, result })),
        );
        events.push(done(
            if kind == JobKind::Time {
                Verdict::Unchecked
            } else {
                Verdict::Pass
            },
            None,
        ));
        Outcome::from_events(events)
    }
}

#[derive(Default, Clone)]
pub(super) struct MemSink {
    pub(super) events: Arc<Mutex<Vec<SessionEvent>>>,
    pub(super) mid: u64,
    pub(super) rev: u32,
    pub(super) streamed: Arc<Mutex<String>>,
    /// `name(args)` of every tool call as it started.
    pub(super) started: Arc<Mutex<Vec<String>>>,
}

impl Sink for MemSink {
    fn record(&mut self, ev: SessionEvent) {
        self.events.lock().unwrap().push(ev);
    }
    fn alloc_rev(&mut self, _op: &str) -> u32 {
        self.rev += 1;
        self.rev
    }
    fn alloc_mid(&mut self) -> u64 {
        self.mid += 1;
        self.mid
    }
    fn stream(&mut self, d: Delta<'_>) {
        let mut s = self.streamed.lock().unwrap();
        match d {
            Delta::Reset(_) => s.clear(),
            Delta::Text(t) => s.push_str(t),
        }
    }
    fn tool_started(&mut self, name: &str, args: &str) {
        self.started.lock().unwrap().push(format!("{name}({args})"));
    }
}

// ---- A real HTTP server on loopback ----

#[derive(Clone)]
pub(super) enum Resp {
    Status(u16, String),
    /// SSE events (each a full "event: …\ndata: …" block), written with a pause between them.
    Sse(Vec<String>),
    /// Accept and say nothing for this long.
    Stall(Duration),
    /// A 200 event stream written as these raw chunks, with this pause after each one.
    Chunks(Vec<Vec<u8>>, Duration),
}

pub(super) struct Server {
    pub(super) url: String,
    pub(super) requests: Arc<Mutex<Vec<String>>>,
}

pub(super) async fn serve(script: Vec<Resp>) -> Server {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let reqs = requests.clone();
    tokio::spawn(async move {
        let mut script = script.into_iter();
        loop {
            let Ok((mut sock, _)) = l.accept().await else {
                break;
            };
            let resp = script
                .next()
                .unwrap_or(Resp::Status(500, "script ended".into()));
            let reqs = reqs.clone();
            tokio::spawn(async move {
                // Read the head, then the body by Content-Length.
                let mut buf = Vec::new();
                let mut tmp = [0u8; 4096];
                let head_end = loop {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        (k.eq_ignore_ascii_case("content-length")).then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n = sock.read(&mut tmp).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&tmp[..n]);
                }
                reqs.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).to_string());
                match resp {
                    Resp::Status(code, body) => {
                        let r = format!(
                            "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\nretry-after: 0\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = sock.write_all(r.as_bytes()).await;
                    }
                    Resp::Sse(events) => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-request-id: req-42\r\nconnection: close\r\n\r\n")
                            .await;
                        for e in events {
                            let _ = sock.write_all(format!("{e}\n\n").as_bytes()).await;
                            let _ = sock.flush().await;
                            tokio::time::sleep(Duration::from_millis(2)).await;
                        }
                    }
                    Resp::Stall(d) => {
                        tokio::time::sleep(d).await;
                    }
                    Resp::Chunks(chunks, pause) => {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
                            .await;
                        for c in chunks {
                            let _ = sock.write_all(&c).await;
                            let _ = sock.flush().await;
                            tokio::time::sleep(pause).await;
                        }
                    }
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { url, requests }
}

/// An OpenAI-style stream of `text` in three pieces, with usage in the last chunk.
pub(super) fn openai_sse(text: &str, tin: u64, tout: u64) -> Resp {
    let third = text.len() / 3;
    let cut = |i: usize| {
        let mut i = i;
        while !text.is_char_boundary(i) {
            i += 1;
        }
        i
    };
    let (a, b) = (cut(third), cut(2 * third));
    let mut ev: Vec<String> = [&text[..a], &text[a..b], &text[b..]]
        .iter()
        .map(|p| {
            format!(
                "data: {}",
                serde_json::json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": p}}]})
            )
        })
        .collect();
    ev.insert(0, "data: {not json".into()); // a malformed event is skipped
    ev.push(format!(
        "data: {}",
        serde_json::json!({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": tin, "completion_tokens": tout}})
    ));
    ev.push("data: [DONE]".into());
    Resp::Sse(ev)
}

pub(super) fn anthropic_sse(text: &str, tin: u64, tout: u64) -> Resp {
    let mid = text.len() / 2;
    let mut mid2 = mid;
    while !text.is_char_boundary(mid2) {
        mid2 += 1;
    }
    let d = |t: &str| {
        format!(
            "event: content_block_delta\ndata: {}",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
        )
    };
    Resp::Sse(vec![
        format!(
            "event: message_start\ndata: {}",
            serde_json::json!({"type": "message_start", "message": {"id": "msg_01", "usage": {"input_tokens": tin, "output_tokens": 1}}})
        ),
        "event: ping\ndata: {\"type\": \"ping\"}".into(),
        d(&text[..mid2]),
        d(&text[mid2..]),
        format!(
            "event: message_delta\ndata: {}",
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": tout}})
        ),
        "event: message_stop\ndata: {\"type\": \"message_stop\"}".into(),
    ])
}

pub(super) fn client(kind: BackendKind, url: &str, timeout_ms: u64) -> LlmClient {
    let mut c = LlmClient::new(
        Endpoint {
            kind,
            base_url: url.to_string(),
            model: "kernel-model".into(),
            key: Secret::new(KEY),
        },
        Duration::from_millis(timeout_ms),
        3,
        1024,
    )
    .unwrap();
    c.backoff = Duration::from_millis(5);
    c
}
