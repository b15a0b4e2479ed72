//! The loop against fake measurements and a real HTTP server on loopback.

use super::config::{BackendKind, Endpoint, Secret};
use super::driver::*;
use super::file_sink::FileSink;
use super::llm::{Delta, LlmClient};
use super::tuner::{Base, Search};
use super::*;
use crate::engine::outcome::Outcome;
use crate::engine::protocol::{Event, JobKind, Mode, ShapeResult, Verdict};
use crate::engine::stats::TimingStats;
use crate::session::{Author, SessionEvent};
use crate::suite::{Suite, SuiteSource};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FIXTURE: &str = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"BLOCK\"]\nargs = [\"out\", \"x\", \"weight\", \"H:i32\", \"eps:f32\"]\n\n[tune]\nBLOCK = [128, 256, 512, 1024]\nVEC = [1, 2, 4, 8]\n*/\nextern \"C\" __global__ void k() {}\n";

fn suite() -> Suite {
    Suite::load(SuiteSource::Embedded).unwrap()
}

/// S as a function of the defines: optimum at BLOCK=512, VEC=4 (0.9); the fixture's start
/// (128, 1) gives 0.6. `flat` makes every configuration equal (no improvement ever).
fn landscape(src: &str, flat: bool) -> Option<f64> {
    let p = crate::engine::plan::parse(src).ok()?;
    if flat {
        return Some(0.5);
    }
    let b = p.defines.get("BLOCK")?.as_f64()?;
    let v = p.defines.get("VEC")?.as_f64()?;
    Some(0.9 - 0.1 * (b / 512.0).log2().abs() - 0.05 * (v / 4.0).log2().abs())
}

#[derive(Default)]
struct FakeMeasurer {
    flat: bool,
    /// (source, kind, mode) of every job.
    jobs: Arc<Mutex<Vec<(String, JobKind, Mode)>>>,
    /// Sources that fail to compile.
    broken: Option<String>,
}

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
        }),
        sol_ms,
        s: Some(s),
        message: None,
        device: None,
    }
}

fn worker(e: Event) -> crate::engine::client::JobEvent {
    crate::engine::client::JobEvent::Worker(e)
}

fn done(verdict: Verdict, message: Option<&str>) -> crate::engine::client::JobEvent {
    worker(Event::Done {
        id: 1,
        verdict,
        message: message.map(|m| m.to_string()),
    })
}

impl Measurer for FakeMeasurer {
    async fn run(&mut self, source: &str, kind: JobKind, mode: Mode) -> Outcome {
        self.jobs
            .lock()
            .unwrap()
            .push((source.to_string(), kind, mode));
        let compiled = |ok: bool| Event::Compiled {
            id: 1,
            which: "candidate".into(),
            ok,
            cached: false,
            ms: 1.0,
            diagnostics: vec![],
            log: String::new(),
            resources: BTreeMap::new(),
        };
        if self.broken.as_deref().is_some_and(|b| source.contains(b)) {
            return Outcome::from_events([
                worker(compiled(false)),
                done(Verdict::CompileError, Some("error: broken")),
            ]);
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
        // its timed runs (see engine::worker::time_shape).
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
struct MemSink {
    events: Arc<Mutex<Vec<SessionEvent>>>,
    mid: u64,
    rev: u32,
    streamed: Arc<Mutex<String>>,
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
}

fn driver<P: Proposer>(
    proposer: P,
    measurer: FakeMeasurer,
    sink: MemSink,
    source: &str,
    budget: Budget,
    mode: DecisionMode,
) -> Driver<P, FakeMeasurer, super::setup::NoGate, MemSink> {
    let s = suite();
    let p = s.problem("rms_norm").unwrap().clone();
    let hw = s.hardware("H200").unwrap().clone();
    Driver {
        state: AgentState::new("rms_norm", 0, source.to_string(), None),
        budget,
        proposer,
        measurer,
        gate: super::setup::NoGate,
        sink,
        problem: p,
        hw,
        docs: knowledge::docs(),
        incumbent_measure: None,
        mode,
        seed: 42,
        k_docs: 6,
        best_seen: None,
    }
}

fn tuner_for(source: &str, seed: u64) -> TunerProposer {
    TunerProposer::with_bases(
        vec![Base::from_source("incumbent", source).unwrap()],
        None,
        seed,
    )
}

#[tokio::test]
async fn the_tuner_loop_in_auto_mode_climbs_to_the_optimum() {
    let m = FakeMeasurer::default();
    let jobs = m.jobs.clone();
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 40,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 1),
        m,
        sink,
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::SearchExhausted, "{stop}");
    assert!(
        (d.state.incumbent_s.unwrap() - 0.9).abs() < 1e-9,
        "{:?}",
        d.state.incumbent_s
    );
    let p = crate::engine::plan::parse(&d.state.incumbent_source).unwrap();
    assert_eq!(p.defines["BLOCK"].as_f64(), Some(512.0));
    assert_eq!(p.defines["VEC"].as_f64(), Some(4.0));
    // Every revision is a real revision with a [defines] change, by the tuner; no source twice.
    let ev = events.lock().unwrap().clone();
    let revs: Vec<&SessionEvent> = ev
        .iter()
        .filter(|e| matches!(e, SessionEvent::Revision { .. }))
        .collect();
    assert_eq!(
        revs.len(),
        15,
        "16 configurations, the start already measured"
    );
    let mut sources: Vec<String> = revs
        .iter()
        .map(|e| match e {
            SessionEvent::Revision {
                source,
                author,
                category,
                ..
            } => {
                assert_eq!(author, &Author::Tuner);
                assert!(category.is_some());
                assert!(source.contains("[defines]"));
                source.clone()
            }
            _ => unreachable!(),
        })
        .collect();
    sources.sort();
    sources.dedup();
    assert_eq!(sources.len(), 15);
    // Auto decisions, each accepted one after an A B B A of four timing jobs.
    let accepted = ev
        .iter()
        .filter(|e| {
            matches!(
                e,
                SessionEvent::Decision {
                    decision: crate::session::Decision::Accepted,
                    by: crate::session::DecidedBy::Auto,
                    ..
                }
            )
        })
        .count();
    assert!(accepted >= 2);
    let times = jobs
        .lock()
        .unwrap()
        .iter()
        .filter(|j| j.1 == JobKind::Time)
        .count();
    assert!(times >= 4 * accepted && times % 4 == 0);
    // A stop reason is recorded.
    assert!(
        matches!(ev.last(), Some(SessionEvent::AgentState { state, reason: Some(r), .. }) if state == "stopped" && r.contains("exhausted"))
    );
}

#[tokio::test]
async fn a_stalled_loop_drops_out_and_masks_about_half_never_v0_nor_the_best() {
    let m = FakeMeasurer {
        flat: true,
        ..Default::default()
    };
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 7,
        dropout_k: 3,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 5),
        m,
        sink,
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::MaxIterations(7));
    assert!(d.state.dropouts >= 2, "{}", d.state.dropouts);
    let ev = events.lock().unwrap().clone();
    let drops: Vec<(String, Vec<u32>)> = ev
        .iter()
        .filter_map(|e| match e {
            SessionEvent::AgentState {
                state,
                reason,
                masked,
                ..
            } if state == "dropout" => Some((reason.clone().unwrap_or_default(), masked.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(drops.len(), d.state.dropouts);
    for (reason, masked) in &drops {
        assert!(reason.contains("masked"), "{reason}");
        assert!(!masked.contains(&0));
        assert!(!masked.is_empty());
    }
    // The stall was logged before the first dropout.
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::AgentState { state, .. } if state == "stall"))
    );
    // The masked entries are not in the next context.
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    for h in d.state.history.iter().filter(|h| h.masked) {
        assert!(
            !ctx.user.contains(&format!("- v{} ", h.rev.unwrap())),
            "v{:?} is masked",
            h.rev
        );
    }
}

fn entry(rev: Option<u32>, s: Option<f64>) -> HistoryEntry {
    HistoryEntry {
        rev,
        parent: Some(0),
        hypothesis: String::new(),
        category: "fusion".into(),
        change: String::new(),
        evidence: Evidence {
            full: s.map(|s| MeasureSummary {
                s_op: Some(s),
                compiled: true,
                verdict: "pass".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        result: String::new(),
        decision: AgentDecision::Pending,
        masked: false,
        tokens_in: 0,
        tokens_out: 0,
        request_id: None,
        knowledge: vec![],
    }
}

#[test]
fn dropout_masking_rules() {
    // v0 .. v8 plus a failed proposal; v5 is the best.
    let mut h: Vec<HistoryEntry> = (0..9)
        .map(|r| {
            entry(
                Some(r),
                Some(if r == 5 { 0.9 } else { 0.1 * (r as f64 % 4.0) }),
            )
        })
        .collect();
    h.push(entry(None, None));
    for seed in 0..200 {
        let m = dropout_mask(&h, Some(5), seed);
        // 8 eligible (v1..v4, v6..v8, the failed one): half of them.
        assert_eq!(m.len(), 4, "seed {seed}");
        for i in &m {
            assert_ne!(h[*i].rev, Some(0));
            assert_ne!(h[*i].rev, Some(5));
        }
    }
    // Different seeds give different masks.
    assert_ne!(dropout_mask(&h, Some(5), 1), dropout_mask(&h, Some(5), 2));
    let mut st = AgentState::new("rms_norm", 0, String::new(), Some(0.1));
    st.history = h;
    assert_eq!(st.best_rev(), Some(5));
    let masked = st.dropout(9);
    assert_eq!(st.history.iter().filter(|e| e.masked).count(), 4);
    assert!(!masked.contains(&0) && !masked.contains(&5));
    assert_eq!(st.since_improvement, 0);
    // Too little history: nothing to mask but v0.
    assert!(dropout_mask(&[entry(Some(0), Some(0.5))], Some(0), 3).is_empty());
}

// ---- A real HTTP server on loopback ----

#[derive(Clone)]
enum Resp {
    Status(u16, String),
    /// SSE events (each a full "event: …\ndata: …" block), written with a pause between them.
    Sse(Vec<String>),
    /// Accept and say nothing for this long.
    Stall(Duration),
    /// A 200 event stream written as these raw chunks, with this pause after each one.
    Chunks(Vec<Vec<u8>>, Duration),
}

struct Server {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

async fn serve(script: Vec<Resp>) -> Server {
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
fn openai_sse(text: &str, tin: u64, tout: u64) -> Resp {
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

fn anthropic_sse(text: &str, tin: u64, tout: u64) -> Resp {
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

const KEY: &str = "sk-test-NEVERLOGME0123456789abcdef";

fn client(kind: BackendKind, url: &str, timeout_ms: u64) -> LlmClient {
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

/// A valid reply: a diff against the fixture that changes a comment line and sets S.
fn good_reply() -> String {
    "Hypothesis: a marker line changes the measured S\nCategory: instruction-level\n```diff\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -12,1 +12,2 @@\n extern \"C\" __global__ void k() {}\n+// S=0.8\n```\n".into()
}

const PLAIN: &str = "/* atrex:plan\n[[launch]]\nkernel = \"k\"\ngrid = [\"T\"]\nblock = [\"256\"]\nargs = [\"out\", \"x\", \"weight\", \"H:i32\", \"eps:f32\"]\n*/\n// S=0.5\n// a\n// b\n// c\nextern \"C\" __global__ void k() {}\n";

#[tokio::test]
async fn openai_backend_retries_429_corrects_a_malformed_reply_and_records_tokens() {
    let srv = serve(vec![
        Resp::Status(429, "{\"error\":{\"message\":\"slow down\"}}".into()),
        Resp::Status(503, "overloaded".into()),
        openai_sse("I think we should vectorize. No format here.", 100, 10),
        openai_sse(&good_reply(), 200, 50),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let streamed = sink.streamed.clone();
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert_eq!(stop, StopReason::MaxIterations(1));
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 4);
    assert!(reqs[0].starts_with("POST /chat/completions"), "{}", reqs[0]);
    assert!(
        reqs[0].contains(&format!("authorization: Bearer {KEY}"))
            || reqs[0].contains(&format!("Authorization: Bearer {KEY}"))
    );
    assert!(reqs[0].contains("\"stream\":true"));
    // The corrective message went with the second completion.
    assert!(reqs[3].contains("could not be used") && reqs[3].contains("assistant"));
    let ev = events.lock().unwrap().clone();
    let rev = ev
        .iter()
        .find_map(|e| match e {
            SessionEvent::Revision {
                rev,
                author,
                tokens_in,
                tokens_out,
                request_id,
                category,
                source,
                knowledge,
                ..
            } => Some((
                *rev,
                author.clone(),
                *tokens_in,
                *tokens_out,
                request_id.clone(),
                category.clone(),
                source.clone(),
                knowledge.clone(),
            )),
            _ => None,
        })
        .expect("a revision");
    assert_eq!(rev.1, Author::Model("kernel-model".into()));
    assert_eq!(
        (rev.2, rev.3),
        (Some(300), Some(60)),
        "tokens of both completions"
    );
    assert_eq!(rev.4.as_deref(), Some("req-42"));
    assert_eq!(rev.5.as_deref(), Some("instruction-level"));
    assert!(rev.6.contains("// S=0.8") && rev.6.contains("// S=0.5"));
    assert!(!rev.7.is_empty(), "the knowledge given is recorded");
    assert_eq!(d.state.tokens(), 360);
    // The candidate (S 0.8) beat the incumbent (0.5) in the A B B A: accepted.
    assert_eq!(d.state.incumbent_rev, rev.0);
    assert!(streamed.lock().unwrap().contains("Hypothesis"));
}

#[tokio::test]
async fn anthropic_backend_survives_a_timeout_and_streams() {
    let full = format!(
        "Hypothesis: rewrite\nCategory: algorithm\n```cuda\n{}```\n",
        PLAIN.replace("// S=0.5", "// S=0.7")
    );
    let srv = serve(vec![
        Resp::Stall(Duration::from_millis(800)),
        anthropic_sse(&full, 1234, 99),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let p = LlmProposer {
        client: client(BackendKind::Anthropic, &srv.url, 300),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let reqs = srv.requests.lock().unwrap().clone();
    assert!(reqs.len() >= 2);
    assert!(reqs[1].starts_with("POST /v1/messages"), "{}", reqs[1]);
    assert!(
        reqs[1]
            .to_lowercase()
            .contains(&format!("x-api-key: {}", KEY.to_lowercase()))
    );
    assert!(reqs[1].contains("anthropic-version"));
    let ev = events.lock().unwrap().clone();
    let (tin, tout, rid) = ev
        .iter()
        .find_map(|e| match e {
            SessionEvent::Revision {
                tokens_in,
                tokens_out,
                request_id,
                ..
            } => Some((*tokens_in, *tokens_out, request_id.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!((tin, tout), (Some(1234), Some(99)));
    assert_eq!(rid.as_deref(), Some("req-42"));
    // Accepted automatically: S 0.7 > 0.5 beyond the noise.
    assert_eq!(d.state.incumbent_rev, 1);
    assert!((d.state.incumbent_s.unwrap() - 0.7).abs() < 1e-9);
}

#[tokio::test]
async fn two_unparseable_replies_make_a_failed_revision() {
    let srv = serve(vec![
        openai_sse("Category: fusion\n```cuda\nno plan\n```", 10, 5),
        openai_sse("still nothing useful", 10, 5),
    ])
    .await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let last = d.state.history.last().unwrap();
    assert_eq!(last.rev, None);
    assert!(
        last.result.starts_with("unparseable reply"),
        "{}",
        last.result
    );
    assert_eq!((last.tokens_in, last.tokens_out), (20, 10));
    let ev = events.lock().unwrap().clone();
    assert!(
        !ev.iter()
            .any(|e| matches!(e, SessionEvent::Revision { rev, .. } if *rev > 0))
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, SessionEvent::AgentState { state, .. } if state == "failed"))
    );
}

#[tokio::test]
async fn auth_and_not_found_errors_stop_the_loop_with_clear_messages() {
    for (code, body, want) in [
        (
            401,
            "{\"error\":{\"message\":\"bad key sk-test-NEVERLOGME0123456789abcdef\"}}",
            "authentication failed (401)",
        ),
        (
            404,
            "{\"error\":{\"message\":\"The model `kernel-model` does not exist\"}}",
            "unknown model `kernel-model`",
        ),
        (404, "not here", "not found (404): check the base URL"),
        (
            400,
            "{\"error\":{\"message\":\"model not found: kernel-model\"}}",
            "unknown model",
        ),
    ] {
        let srv = serve(vec![Resp::Status(code, body.into())]).await;
        let sink = MemSink::default();
        let p = LlmProposer {
            client: client(BackendKind::Openai, &srv.url, 2000),
        };
        let mut d = driver(
            p,
            FakeMeasurer::default(),
            sink,
            PLAIN,
            Budget::default(),
            DecisionMode::Auto,
        );
        let stop = d.run().await;
        let StopReason::Backend(msg) = &stop else {
            panic!("{stop:?}")
        };
        assert!(msg.contains(want), "{code}: {msg}");
        assert!(!msg.contains(KEY), "the key never shows: {msg}");
        assert_eq!(srv.requests.lock().unwrap().len(), 1, "no retry on {code}");
    }
}

#[tokio::test]
async fn retries_are_bounded() {
    let srv = serve(vec![Resp::Status(500, "a".into()); 10]).await;
    let c = client(BackendKind::Openai, &srv.url, 2000);
    let mut sink = |_d: Delta<'_>| {};
    let e = c.complete("s", &[], &mut sink).await.unwrap_err();
    assert!(
        matches!(e, super::llm::LlmError::Exhausted(ref m) if m.contains("500")),
        "{e:?}"
    );
    assert_eq!(srv.requests.lock().unwrap().len(), 4, "1 + 3 retries");
}

/// One OpenAI-style chunk carrying `text`.
fn openai_chunk(text: &str) -> String {
    format!(
        "data: {}",
        serde_json::json!({"id": "chatcmpl-7", "choices": [{"index": 0, "delta": {"content": text}}]})
    )
}

/// A completion against `script`, with the texts streamed (a reset shows as `<reset: why>`).
async fn complete(
    kind: BackendKind,
    script: Vec<Resp>,
    timeout_ms: u64,
) -> (Result<super::llm::Completion, super::llm::LlmError>, String) {
    let srv = serve(script).await;
    let c = client(kind, &srv.url, timeout_ms);
    let mut seen = String::new();
    let mut sink = |d: Delta<'_>| match d {
        Delta::Text(t) => seen.push_str(t),
        Delta::Reset(why) => seen.push_str(&format!("<reset: {why}>")),
    };
    let r = c.complete("s", &[], &mut sink).await;
    (r, seen)
}

#[tokio::test]
async fn sse_events_split_across_chunks_with_crlf_comments_and_multibyte_text() {
    let usage =
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}});
    let body = format!(
        ": keep-alive\r\n\r\n{}\r\n\r\n{}\r\n\r\ndata: {usage}\r\n\r\ndata: [DONE]\r\n\r\n",
        openai_chunk("héllo "),
        openai_chunk("wörld")
    );
    // Cut every 5 bytes: through lines, through "\r\n" and through two-byte characters.
    let chunks: Vec<Vec<u8>> = body.as_bytes().chunks(5).map(|c| c.to_vec()).collect();
    let script = vec![Resp::Chunks(chunks, Duration::from_millis(1))];
    let (r, seen) = complete(BackendKind::Openai, script, 2000).await;
    let c = r.unwrap();
    assert_eq!(
        (c.text.as_str(), seen.as_str()),
        ("héllo wörld", "héllo wörld")
    );
    assert_eq!((c.tokens_in, c.tokens_out, c.attempts), (7, 3, 1));
    assert_eq!(c.request_id.as_deref(), Some("chatcmpl-7"));
}

#[tokio::test]
async fn a_cut_stream_keeps_what_it_delivered_and_retries_when_nothing_came() {
    // No [DONE] and no blank line after the last event: its text still counts.
    let cut = format!(
        "{}\n\n{}",
        openai_chunk("part one, "),
        openai_chunk("part two")
    );
    let script = vec![Resp::Chunks(vec![cut.into_bytes()], Duration::ZERO)];
    let (r, _) = complete(BackendKind::Openai, script, 2000).await;
    let c = r.unwrap();
    assert_eq!((c.text.as_str(), c.attempts), ("part one, part two", 1));

    let empty = vec![Resp::Chunks(
        vec![b": nothing\n\n".to_vec()],
        Duration::ZERO,
    )];
    let script = [empty, vec![openai_sse("second try", 1, 1)]].concat();
    let (r, seen) = complete(BackendKind::Openai, script, 2000).await;
    assert_eq!(r.unwrap().attempts, 2);
    assert!(seen.contains("the stream ended without a reply"), "{seen}");
}

#[tokio::test]
async fn the_idle_timeout_is_between_chunks_not_between_events() {
    // Keep-alive comments every 100 ms for 600 ms, with a 300 ms timeout: no stall.
    let mut chunks = vec![b": keep-alive\n\n".to_vec(); 6];
    chunks.push(format!("{}\n\ndata: [DONE]\n\n", openai_chunk("slow but alive")).into_bytes());
    let script = vec![Resp::Chunks(chunks, Duration::from_millis(100))];
    let (r, _) = complete(BackendKind::Openai, script, 300).await;
    assert_eq!(r.unwrap().attempts, 1);

    // A first chunk, then silence past the timeout: retried with a clear message.
    let first = format!("{}\n\n", openai_chunk("lost "));
    let stalled = Resp::Chunks(
        vec![first.into_bytes(), b"data: [DONE]\n\n".to_vec()],
        Duration::from_millis(400),
    );
    let (r, seen) = complete(
        BackendKind::Openai,
        vec![stalled, openai_sse("kept", 1, 1)],
        300,
    )
    .await;
    let c = r.unwrap();
    assert_eq!((c.text.as_str(), c.attempts), ("kept", 2));
    assert!(seen.contains("the stream stalled for 0.3 s"), "{seen}");
}

#[tokio::test]
async fn anthropic_error_events_retry_when_transient_and_stop_otherwise() {
    let error = |ty: &str| {
        let e =
            serde_json::json!({"type": "error", "error": {"type": ty, "message": "it went wrong"}});
        Resp::Sse(vec![format!("event: error\ndata: {e}")])
    };
    let script = vec![error("overloaded_error"), anthropic_sse("fine now", 5, 2)];
    let (r, seen) = complete(BackendKind::Anthropic, script, 2000).await;
    let c = r.unwrap();
    assert_eq!(
        (c.text.as_str(), c.tokens_in, c.tokens_out),
        ("fine now", 5, 2)
    );
    assert_eq!(c.request_id.as_deref(), Some("req-42"));
    assert!(
        seen.contains("<reset: stream error: it went wrong>"),
        "{seen}"
    );

    let (r, _) = complete(
        BackendKind::Anthropic,
        vec![error("invalid_request_error")],
        2000,
    )
    .await;
    assert_eq!(
        r.unwrap_err(),
        super::llm::LlmError::Fatal("stream error: it went wrong".into())
    );
}

#[tokio::test]
async fn keys_never_reach_session_files() {
    let dir = std::env::temp_dir().join(format!("atrex-agent-keys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("s.jsonl");
    let writer = crate::session::SessionWriter::create(&path).unwrap();
    // The server echoes the key in a reply (a hostile or confused endpoint).
    let reply = format!(
        "Hypothesis: h\nCategory: fusion\n```diff\n@@ -12,1 +12,3 @@\n extern \"C\" __global__ void k() {{}}\n+// S=0.8\n+// header was Bearer {KEY} and {KEY}\n```\n"
    );
    let srv = serve(vec![openai_sse(&reply, 1, 1)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let s = suite();
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, PLAIN.to_string(), None),
        budget: Budget {
            max_iters: 1,
            ..Default::default()
        },
        proposer: p,
        measurer: FakeMeasurer::default(),
        gate: super::setup::NoGate,
        sink: FileSink::new(crate::session::fixtures::test_log(writer, &[]), false),
        problem: s.problem("rms_norm").unwrap().clone(),
        hw: s.hardware("H200").unwrap().clone(),
        docs: knowledge::docs(),
        incumbent_measure: None,
        mode: DecisionMode::Auto,
        seed: 1,
        k_docs: 4,
        best_seen: None,
    };
    d.state.steering.push(format!("use api_key = {KEY} please"));
    d.run().await;
    let src = &d.state.incumbent_source;
    assert!(
        !src.contains("NEVERLOGME"),
        "the accepted source holds no key"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"kind\":\"revision\""), "{text}");
    assert!(
        !text.contains("NEVERLOGME"),
        "a key leaked into the session"
    );
    assert!(format!("{:?}", d.proposer.client.endpoint).contains("[REDACTED]"));
    assert!(!format!("{:?}", d.proposer.client.endpoint).contains("NEVERLOGME"));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_patch_that_does_not_apply_is_a_failed_revision() {
    let bad = "Hypothesis: h\nCategory: fusion\n```diff\n@@ -3,1 +3,1 @@\n-this line is not there\n+x\n```\n";
    let srv = serve(vec![openai_sse(bad, 1, 1)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        MemSink::default(),
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let last = d.state.history.last().unwrap();
    assert!(
        last.result.contains("patch does not apply: hunk 1"),
        "{}",
        last.result
    );
    assert_eq!(last.rev, None);
}

#[tokio::test]
async fn compile_errors_are_rejected_and_counted_toward_dropout() {
    let m = FakeMeasurer {
        broken: Some("BLOCK = 256".into()),
        ..Default::default()
    };
    let budget = Budget {
        max_iters: 2,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 0),
        m,
        MemSink::default(),
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    let h: Vec<&HistoryEntry> = d
        .state
        .history
        .iter()
        .filter(|h| h.result.starts_with("compile error"))
        .collect();
    assert_eq!(
        h.len(),
        1,
        "{:?}",
        d.state
            .history
            .iter()
            .map(|h| h.result.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(h[0].decision, AgentDecision::Rejected);
}

#[test]
fn search_without_a_start_score_still_moves() {
    let b = Base::from_source("k", FIXTURE).unwrap();
    let mut s = Search::new(vec![b], None, 0);
    let (p, _) = s.next().unwrap();
    s.report(&p, Some(0.1));
    assert!(s.best().is_some());
}

#[test]
fn abba_noise_rule() {
    let a = Abba::from_runs([0.50, 0.55, 0.55, 0.50], 0.001);
    assert!(a.significant() && (a.gain - 0.1).abs() < 1e-9);
    // The incumbent moved by 10 % between its two runs: a 5 % gain is noise.
    let b = Abba::from_runs([0.50, 0.55, 0.55, 0.55], 0.001);
    assert!(!b.significant(), "{b:?}");
    let c = Abba::from_runs([0.50, 0.501, 0.501, 0.50], 0.01);
    assert!(!c.significant());
    // A failed timing run (S_op 0) never makes a gain.
    let d = Abba::from_runs([0.0, 0.6, 0.6, 0.5], 0.001);
    assert!(!d.significant(), "{d:?}");
}

#[test]
fn restore_rebuilds_the_agents_memory_from_a_session() {
    use crate::session::{DecidedBy, Decision, Model, Record};
    let s = suite();
    let mut recs = Vec::new();
    let mut push = |e: SessionEvent| {
        let n = recs.len() as u64 + 1;
        recs.push(Record {
            v: 1,
            seq: n,
            t: n as f64,
            event: e,
        });
    };
    let base =
        crate::suite::kernels::suite_kernel(&s, s.problem("rms_norm").unwrap(), "baseline.cu")
            .unwrap()
            .code;
    for rev in 1..=4u32 {
        push(SessionEvent::Revision {
            op: "rms_norm".into(),
            rev,
            parent: Some(0),
            author: Author::Tuner,
            rationale: format!("step {rev}"),
            source: format!("{base}// {rev}\n"),
            via: None,
            request_id: None,
            tokens_in: Some(10),
            tokens_out: Some(5),
            category: Some("launch-config".into()),
            knowledge: vec!["hopper-h200".into()],
        });
    }
    push(SessionEvent::Decision {
        op: "rms_norm".into(),
        rev: 2,
        decision: Decision::Accepted,
        by: DecidedBy::Auto,
    });
    push(SessionEvent::AgentState {
        state: "dropout".into(),
        reason: Some("x".into()),
        op: Some("rms_norm".into()),
        masked: vec![1, 3],
    });
    push(SessionEvent::Steer {
        op: Some("rms_norm".into()),
        text: "try one warp per row".into(),
    });
    let m = Model::from_records(&s, &recs);
    let (st, sources) = super::setup::restore(&m, "rms_norm").unwrap();
    assert_eq!(st.incumbent_rev, 2);
    assert_eq!(st.history.len(), 5, "v0 and four agent revisions");
    assert_eq!(st.iterations, 4);
    assert_eq!(st.tokens(), 60);
    assert_eq!(st.since_improvement, 2, "v3 and v4 after the accepted v2");
    let masked: Vec<u32> = st
        .history
        .iter()
        .filter(|h| h.masked)
        .filter_map(|h| h.rev)
        .collect();
    assert_eq!(masked, vec![1, 3]);
    assert_eq!(st.steering, vec!["try one warp per row".to_string()]);
    assert_eq!(st.history[2].category, "launch-config");
    assert_eq!(sources.len(), 4);
}

/// A scripted human: answers in order, notes steering, then stops.
struct ScriptGate {
    answers: Vec<GateAnswer>,
    asked: Arc<Mutex<Vec<u32>>>,
    notes: Vec<String>,
}

impl Gate for ScriptGate {
    async fn decide(&mut self, rev: u32) -> GateAnswer {
        self.asked.lock().unwrap().push(rev);
        if self.answers.is_empty() {
            GateAnswer::Stop
        } else {
            self.answers.remove(0)
        }
    }
    fn steering(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

#[tokio::test]
async fn the_human_gate_decides_and_stops_the_loop() {
    use crate::session::Decision;
    let s = suite();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, FIXTURE.to_string(), None),
        budget: Budget::default(),
        proposer: tuner_for(FIXTURE, 2),
        measurer: FakeMeasurer::default(),
        gate: ScriptGate {
            answers: vec![
                GateAnswer::Decided(Decision::Rejected),
                GateAnswer::Decided(Decision::Accepted),
                GateAnswer::Steer("unroll the loads".into()),
            ],
            asked: asked.clone(),
            notes: vec!["prefer 512 threads".into()],
        },
        sink: MemSink::default(),
        problem: s.problem("rms_norm").unwrap().clone(),
        hw: s.hardware("H200").unwrap().clone(),
        docs: vec![],
        incumbent_measure: None,
        mode: DecisionMode::Human,
        seed: 1,
        k_docs: 0,
        best_seen: None,
    };
    let stop = d.run().await;
    assert_eq!(stop, StopReason::Stopped);
    assert_eq!(*asked.lock().unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(
        d.state.incumbent_rev, 2,
        "the accepted revision is the incumbent"
    );
    assert_eq!(
        d.state.steering,
        vec![
            "prefer 512 threads".to_string(),
            "unroll the loads".to_string()
        ]
    );
    let decisions: Vec<AgentDecision> =
        d.state.history.iter().skip(1).map(|h| h.decision).collect();
    assert_eq!(
        decisions,
        vec![
            AgentDecision::Rejected,
            AgentDecision::Accepted,
            AgentDecision::Pending,
            AgentDecision::Pending
        ]
    );
    // The steering note reaches the context.
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    assert!(ctx.user.contains("prefer 512 threads"));
}

#[tokio::test]
async fn budgets_stop_on_target_and_tokens_and_suggest_mode_decides_nothing() {
    // Target: the first accepted step from 0.6 reaches 0.65.
    let budget = Budget {
        target_s: Some(0.65),
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 4),
        FakeMeasurer::default(),
        MemSink::default(),
        FIXTURE,
        budget,
        DecisionMode::Auto,
    );
    let stop = d.run().await;
    assert!(
        matches!(stop, StopReason::TargetReached(s) if s >= 0.65),
        "{stop:?}"
    );
    // Tokens: one LLM reply of 300 tokens spends a budget of 100.
    let srv = serve(vec![openai_sse(&good_reply(), 200, 100)]).await;
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_tokens: Some(100),
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        MemSink::default(),
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    assert_eq!(d.run().await, StopReason::MaxTokens(100));
    assert_eq!(srv.requests.lock().unwrap().len(), 1);
    // Suggest: revisions measured, nothing decided, the incumbent stays.
    let sink = MemSink::default();
    let events = sink.events.clone();
    let budget = Budget {
        max_iters: 4,
        ..Default::default()
    };
    let mut d = driver(
        tuner_for(FIXTURE, 4),
        FakeMeasurer::default(),
        sink,
        FIXTURE,
        budget,
        DecisionMode::Suggest,
    );
    d.run().await;
    assert_eq!(d.state.incumbent_rev, 0);
    assert!(
        !events
            .lock()
            .unwrap()
            .iter()
            .any(|e| matches!(e, SessionEvent::Decision { .. }))
    );
    assert!(
        d.state
            .history
            .iter()
            .skip(1)
            .all(|h| h.decision == AgentDecision::Pending)
    );
    assert_eq!(
        d.state.dropouts, 0,
        "improving measurements are not a stall"
    );
}

#[test]
fn a_recorded_profile_changes_the_context_and_retrieval() {
    use crate::session::{Model, Record};
    let s = suite();
    let p = s.problem("rms_norm").unwrap().clone();
    let hw = s.hardware("H200").unwrap().clone();
    let docs = super::knowledge::docs();
    let base = crate::suite::kernels::suite_kernel(&s, &p, "baseline.cu")
        .unwrap()
        .code;
    let rec = |seq: u64, event: SessionEvent| Record {
        v: 1,
        seq,
        t: seq as f64,
        event,
    };
    let rev0 = SessionEvent::Revision {
        op: "rms_norm".into(),
        rev: 0,
        parent: None,
        author: Author::Baseline,
        rationale: "suite baseline".into(),
        source: base,
        via: None,
        request_id: None,
        tokens_in: None,
        tokens_out: None,
        category: None,
        knowledge: vec![],
    };
    let without = Model::from_records(&s, &[rec(1, rev0.clone())]);
    let with = Model::from_records(
        &s,
        &[
            rec(1, rev0),
            rec(
                2,
                SessionEvent::Profile {
                    op: "rms_norm".into(),
                    rev: 0,
                    profile: Box::new(crate::profile::fixture("rms_norm", 0, 27)),
                },
            ),
        ],
    );
    let (st0, _) = super::setup::restore(&without, "rms_norm").unwrap();
    let (st1, _) = super::setup::restore(&with, "rms_norm").unwrap();
    assert!(st0.profiles.is_empty());
    assert_eq!(st1.profiles.len(), 1);
    assert_eq!(
        st1.profiles[0].rules,
        vec!["warp_divergence", "low_occupancy", "latency_bound"]
    );
    let c0 = context::build(&p, &hw, &st0, &docs, None, 6);
    let c1 = context::build(&p, &hw, &st1, &docs, None, 6);
    // The finding rules are retrieval symptoms …
    for sym in ["warp-divergence", "low-occupancy", "latency-bound"] {
        assert!(!c0.query.symptoms.iter().any(|x| x == sym));
        assert!(
            c1.query.symptoms.iter().any(|x| x == sym),
            "{:?}",
            c1.query.symptoms
        );
    }
    // … that change what is retrieved …
    assert_ne!(c0.knowledge, c1.knowledge);
    assert!(
        c1.knowledge.iter().any(|k| k == "ilp-unroll")
            || c1.knowledge.iter().any(|k| k == "warp-per-row"),
        "{:?}",
        c1.knowledge
    );
    // … and the findings are in the model's context.
    assert!(!c0.user.contains("## Profiler findings"));
    assert!(c1.user.contains("## Profiler findings (Nsight Compute)"));
    assert!(c1.user.contains("v0 (the incumbent) on shape #27"));
    assert!(
        c1.user
            .contains("finding [low_occupancy] rms_norm_kernel: low occupancy — achieved 19%"),
        "{}",
        c1.user
    );
    assert!(c1.user.contains("long_scoreboard"));
}

/// A gate that hands over one deep profile, then stops at the first decision.
struct ProfileGate(Vec<ProfileNote>);

impl Gate for ProfileGate {
    async fn decide(&mut self, _rev: u32) -> GateAnswer {
        GateAnswer::Stop
    }
    fn profiles(&mut self) -> Vec<ProfileNote> {
        std::mem::take(&mut self.0)
    }
}

#[tokio::test]
async fn a_profile_sent_to_the_running_agent_reaches_its_state() {
    let s = suite();
    let note = ProfileNote::from_profile(0, &crate::profile::fixture("rms_norm", 0, 27));
    assert!(note.figures.contains("rms_norm_kernel"), "{}", note.figures);
    let mut d = Driver {
        state: AgentState::new("rms_norm", 0, FIXTURE.to_string(), None),
        budget: Budget::default(),
        proposer: tuner_for(FIXTURE, 2),
        measurer: FakeMeasurer::default(),
        gate: ProfileGate(vec![note.clone()]),
        sink: MemSink::default(),
        problem: s.problem("rms_norm").unwrap().clone(),
        hw: s.hardware("H200").unwrap().clone(),
        docs: vec![],
        incumbent_measure: None,
        mode: DecisionMode::Human,
        seed: 1,
        k_docs: 0,
        best_seen: None,
    };
    d.run().await;
    assert_eq!(d.state.profiles, vec![note]);
    let ctx = context::build(&d.problem, &d.hw, &d.state, &[], None, 0);
    assert!(ctx.user.contains("finding [latency_bound]"), "{}", ctx.user);
}

#[test]
fn finding_rules_map_to_retrieval_symptoms() {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        super::knowledge::symptoms_of_findings(&v(&["grid_too_small", "tail_effect"])),
        v(&["grid-too-small", "low-occupancy", "tail-effect"])
    );
    // Every rule-derived symptom is known to at least one document, so findings matter.
    let docs = super::knowledge::docs();
    for rule in [
        "grid_too_small",
        "tail_effect",
        "uncoalesced_access",
        "register_spills",
        "unintended_fp64",
        "bank_conflicts",
        "warp_divergence",
        "low_occupancy",
        "compute_without_tensor_cores",
        "latency_bound",
        "redundant_traffic",
    ] {
        let sym = rule.replace('_', "-");
        assert!(
            docs.iter().any(|d| d.meta.symptoms.contains(&sym)),
            "no document lists the symptom {sym}"
        );
    }
}

/// A candidate that passes every check but whose timed runs the harness catches (outputs that
/// differ from the check) is refused by the auto rule even though it times faster, and what it
/// printed reaches both the session and the agent's next context.
#[tokio::test]
async fn auto_mode_refuses_a_kernel_caught_in_its_timed_runs() {
    let reply = "Hypothesis: skip finished rows\nCategory: algorithm\n```diff\n--- a/kernel.cu\n+++ b/kernel.cu\n@@ -12,1 +12,3 @@\n extern \"C\" __global__ void k() {}\n+// S=0.8 printf\n+// TIMED-CHEAT\n```\n";
    let srv = serve(vec![openai_sse(reply, 100, 10)]).await;
    let sink = MemSink::default();
    let events = sink.events.clone();
    let p = LlmProposer {
        client: client(BackendKind::Openai, &srv.url, 2000),
    };
    let budget = Budget {
        max_iters: 1,
        ..Default::default()
    };
    let mut d = driver(
        p,
        FakeMeasurer::default(),
        sink,
        PLAIN,
        budget,
        DecisionMode::Auto,
    );
    d.run().await;
    assert_eq!(
        d.state.incumbent_rev, 0,
        "the cheating candidate was not accepted"
    );
    let h = d.state.history.last().unwrap();
    let a = h.evidence.abba.as_ref().expect("an A B B A ran");
    assert!(!a.significant());
    assert!(
        a.refused.as_deref().unwrap().contains("timed run differs"),
        "{a:?}"
    );
    let ev = events.lock().unwrap().clone();
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::Decision {
            decision: crate::session::Decision::Rejected,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(e,
        SessionEvent::KernelOutput { text, .. } if text.contains("row 0: sum 1.5"))));
    let text = super::context::history_text_for_test(&d.state);
    assert!(text.contains("A B B A refused"), "{text}");
    assert!(text.contains("the kernel printed"), "{text}");
}
