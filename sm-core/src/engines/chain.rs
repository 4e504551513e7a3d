//! The engine chain with OpenSM's semantics plus a verification gate.
//!
//! `--engines a,b,c` tries each engine in order. An engine has failed when
//! its constructor or `route` returns an error, when it panics (the ABI
//! adapter turns the panic into an error), or when its result does not pass
//! verification. If every listed engine fails, `minhop-balanced` routes
//! (balanced whatever the LID numbering; OpenSM falls back to its `minhop`,
//! which stays available by name) — unless the list contains `no_fallback`,
//! in which case nothing is routed and the caller keeps what the switches
//! already hold (the torus-2QoS rule).
//!
//! On a re-route after a change, the caller hands the chain the routing in
//! force ([`run_after`]); every engine gets it through `Engine::reroute`
//! (sm-abi 1.3) and keeps what is still valid. A first sweep,
//! `--reassign-lids` and `smcore ctl reroute` hand it nothing: the engines
//! route from scratch (OpenSM's `ignore_existing_lfts`). An engine built
//! against an older sm-abi routes from scratch either way.

use std::time::{Duration, Instant};

use sm_abi::abi_stable::std_types::ROption;
use sm_abi::{FabricSnapshot, PreviousRouting, Routing};
use smcore_kit::verify::{verify_with, Verification, VerifyOptions};
use smcore_kit::Graph;
use thiserror::Error;
use tracing::{info, info_span, warn};

use super::host::{self, HostFailure, Isolation, Mode};
use super::loader::Registry;
use super::wire::Answer;
use sm_model::Escaped;

/// The engine every chain falls back to (OpenSM's is `minhop`).
pub const FALLBACK: &str = "minhop-balanced";
/// The list keyword that disables the fallback.
pub const NO_FALLBACK: &str = "no_fallback";

/// A bad `--engines` list.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ChainError {
    /// A name no loaded library provides.
    #[error("unknown routing engine `{name}`; known engines: {}", known.join(", "))]
    UnknownEngine {
        /// The name given.
        name: String,
        /// Engines the libraries provide.
        known: Vec<String>,
    },
    /// An empty list.
    #[error("no routing engine given (known engines: {})", known.join(", "))]
    Empty {
        /// Engines the libraries provide.
        known: Vec<String>,
    },
    /// The fallback is needed but no library provides it.
    #[error("the fallback engine `minhop-balanced` is not in any engine directory; add `no_fallback` to the list or install it")]
    NoFallbackEngine,
}

/// A parsed engine list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSpec {
    /// Engines in the order to try.
    pub engines: Vec<String>,
    /// `no_fallback` was given.
    pub no_fallback: bool,
}

impl ChainSpec {
    /// Parse `a,b,no_fallback` and check every name against the registry.
    pub fn parse(list: &str, registry: &Registry) -> Result<ChainSpec, ChainError> {
        let known = || registry.names().iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut engines = Vec::new();
        let mut no_fallback = false;
        for word in list.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            if word == NO_FALLBACK {
                no_fallback = true;
            } else if registry.get(word).is_some() {
                engines.push(word.to_string());
            } else {
                return Err(ChainError::UnknownEngine { name: word.to_string(), known: known() });
            }
        }
        if engines.is_empty() {
            return Err(ChainError::Empty { known: known() });
        }
        if !no_fallback && !engines.iter().any(|e| e == FALLBACK) && registry.get(FALLBACK).is_none() {
            return Err(ChainError::NoFallbackEngine);
        }
        Ok(ChainSpec { engines, no_fallback })
    }

    /// The engines that will be tried, fallback included.
    pub fn sequence(&self) -> Vec<String> {
        let mut v = self.engines.clone();
        if !self.no_fallback && !v.iter().any(|e| e == FALLBACK) {
            v.push(FALLBACK.to_string());
        }
        v
    }

    /// The engines of the chain whose configuration their library refuses,
    /// with its reason, asked before any routing (libraries built against
    /// sm-abi 1.0 cannot be asked; their errors show when the chain runs).
    pub fn bad_configs(&self, registry: &Registry, config_for: &dyn Fn(&str) -> String) -> Vec<(String, String)> {
        self.sequence()
            .into_iter()
            .filter_map(|name| {
                let why = registry.get(&name)?.check_config(&config_for(&name))?.err()?;
                Some((name, why))
            })
            .collect()
    }
}

/// When a credit loop fails an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CreditLoopPolicy {
    /// Fatal for engines that promise deadlock freedom, reported otherwise.
    #[default]
    Auto,
    /// Always fatal.
    Fatal,
    /// Never fatal (reported only).
    Warn,
}

/// How results are judged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateOptions {
    /// Verifier options.
    pub verify: VerifyOptions,
    /// Credit loop policy.
    pub credit_loops: CreditLoopPolicy,
}

/// Why an engine did not route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The constructor failed (bad configuration, missing file...).
    Create(String),
    /// `route` returned an error.
    Error(String),
    /// The engine panicked.
    Panic(String),
    /// The result failed verification.
    Verification(String),
    /// The engine host process crashed, exited, ran out of time or
    /// answered nonsense ([`host::HostFailure`]).
    Host(HostFailure),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Create(r) => write!(f, "could not be created: {r}"),
            Failure::Error(r) => write!(f, "failed: {r}"),
            Failure::Panic(r) => write!(f, "panicked: {r}"),
            Failure::Verification(r) => write!(f, "result rejected by verification: {r}"),
            Failure::Host(h) => write!(f, "{h}"),
        }
    }
}

/// One engine tried.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// Engine name.
    pub engine: String,
    /// None when it routed.
    pub failure: Option<Failure>,
    /// Time in the engine's `route`.
    pub route_time: Duration,
    /// Time verifying its result.
    pub verify_time: Duration,
}

/// What the chain did.
#[derive(Debug)]
pub struct ChainOutcome {
    /// Every engine tried, in order.
    pub attempts: Vec<Attempt>,
    /// The accepted routing, with the engine name and its verification.
    pub routed: Option<Routed>,
}

/// An accepted routing.
#[derive(Debug)]
pub struct Routed {
    /// Engine that produced it.
    pub engine: String,
    /// The routing.
    pub routing: Routing,
    /// Its verification (credit loops may be present if tolerated).
    pub verification: Verification,
}

impl ChainOutcome {
    /// One line per engine: who routed and why the others did not.
    pub fn describe(&self) -> Vec<String> {
        describe_attempts(&self.attempts)
    }
}

/// One line per engine tried: who routed and why the others did not.
pub fn describe_attempts(attempts: &[Attempt]) -> Vec<String> {
    attempts
        .iter()
        .map(|a| match &a.failure {
            None => format!("{}: routed", a.engine),
            Some(f) => format!("{}: {f}", a.engine),
        })
        .collect()
}

/// Run the chain on a fabric from scratch. `config_for` gives each
/// engine's config text.
pub fn run(
    registry: &Registry,
    spec: &ChainSpec,
    fabric: &FabricSnapshot,
    config_for: &dyn Fn(&str) -> String,
    gate: &GateOptions,
) -> ChainOutcome {
    run_after(registry, spec, fabric, config_for, gate, None, &Isolation::default())
}

/// Run the chain on a fabric, continuing from `previous` (the routing in
/// force) when given: each engine re-routes from it (`Engine::reroute`),
/// keeping the routes the change left valid.
pub fn run_after(
    registry: &Registry,
    spec: &ChainSpec,
    fabric: &FabricSnapshot,
    config_for: &dyn Fn(&str) -> String,
    gate: &GateOptions,
    previous: Option<&PreviousRouting>,
    isolation: &Isolation,
) -> ChainOutcome {
    let graph = Graph::new(fabric);
    let mut attempts = Vec::new();
    for name in spec.sequence() {
        let span = info_span!("engine", name = %name);
        let _g = span.enter();
        let mut attempt = Attempt { engine: name.clone(), failure: None, route_time: Duration::ZERO, verify_time: Duration::ZERO };
        let Some(entry) = registry.get(&name) else {
            attempt.failure = Some(Failure::Create("no engine library provides it".into()));
            attempts.push(attempt);
            continue;
        };
        let t = Instant::now();
        let result = match isolation.mode {
            Mode::Inline => match entry.create(&config_for(&name)) {
                Ok(engine) => match previous {
                    Some(previous) => engine.reroute(fabric, previous),
                    None => engine.route(fabric),
                }
                .into_result()
                .map_err(|e| classify(e, Failure::Error)),
                Err(e) => Err(classify(e, Failure::Create)),
            },
            Mode::Process => match host::route(entry, &config_for(&name), fabric, previous, isolation) {
                Ok(Answer::Routed(r)) => Ok(r),
                Ok(Answer::Create(e)) => Err(classify(e, Failure::Create)),
                Ok(Answer::Error(e)) => Err(classify(e, Failure::Error)),
                Err(f) => Err(Failure::Host(f)),
            },
        };
        attempt.route_time = t.elapsed();
        let routing = match result.and_then(|r| settle_sl_table(r, fabric)) {
            Ok(r) => r,
            Err(f) => {
                warn!(engine = %Escaped(&name), "{}", Escaped(&f.to_string()));
                attempt.failure = Some(f);
                attempts.push(attempt);
                continue;
            }
        };
        for d in routing.diagnostics.iter() {
            match d.level {
                sm_abi::Level::Info => info!(engine = %Escaped(&name), "{}", Escaped(&d.message)),
                // A level from a newer engine is logged loud rather than lost.
                _ => warn!(engine = %Escaped(&name), "{}", Escaped(&d.message)),
            }
        }
        let t = Instant::now();
        let judged = judge(fabric, &graph, &routing, entry.deadlock_free, gate, &name);
        attempt.verify_time = t.elapsed();
        let verification = match judged {
            Ok(v) => v,
            Err(why) => {
                warn!(engine = %Escaped(&name), "result rejected: {}", Escaped(&why));
                attempt.failure = Some(Failure::Verification(why));
                attempts.push(attempt);
                continue;
            }
        };
        info!(engine = %name, route_ms = attempt.route_time.as_secs_f64() * 1e3, "routed");
        attempts.push(attempt);
        return ChainOutcome { attempts, routed: Some(Routed { engine: name, routing, verification }) };
    }
    ChainOutcome { attempts, routed: None }
}

/// An engine's routing whose oracle gives its SLs as a table (sm-abi 1.2)
/// gets an oracle that answers from that table alone: the verifier judges
/// the table, and the SA and the dumps serve it, so what is checked is what
/// is served, whatever the engine's own `path_sl` would have said. A table
/// of the wrong shape for `fabric` fails the engine.
pub fn settle_sl_table(mut routing: Routing, fabric: &FabricSnapshot) -> Result<Routing, Failure> {
    if let ROption::RSome(table) = routing.path_sl.sl_table() {
        table.check(fabric.max_lid).map_err(|e| Failure::Error(e.to_string()))?;
        routing.path_sl = sm_abi::table_sl_box(table);
    }
    Ok(routing)
}

/// The verification gate: `routing` on `fabric` is accepted, with its
/// verification, or rejected with the reason. Unreachable pairs,
/// forwarding loops and VL overruns always reject; credit loops reject by
/// `gate.credit_loops` (with `Auto`, when the engine promises deadlock
/// freedom) and are otherwise logged.
pub fn judge(
    fabric: &FabricSnapshot,
    graph: &Graph,
    routing: &Routing,
    deadlock_free: bool,
    gate: &GateOptions,
    name: &str,
) -> Result<Verification, String> {
    let verification = verify_with(fabric, graph, routing, &gate.verify);
    let loops_fatal = match gate.credit_loops {
        CreditLoopPolicy::Auto => deadlock_free,
        CreditLoopPolicy::Fatal => true,
        CreditLoopPolicy::Warn => false,
    };
    let mut rejected = verification.unreachable > 0 || verification.looping > 0 || verification.vl_violations > 0;
    if verification.credit_loop.is_some() {
        if loops_fatal {
            rejected = true;
        } else {
            warn!(engine = %name, "routing has credit loops (tolerated: the engine does not promise deadlock freedom)");
        }
    }
    if rejected {
        return Err(verification.failure().unwrap_or_else(|| "verification failed".into()));
    }
    Ok(verification)
}

/// A panic is told from a refusal by the error's kind; its message is the
/// panic's own, without the prefix the ABI adapter puts before it.
fn classify(e: sm_abi::EngineError, otherwise: fn(String) -> Failure) -> Failure {
    let reason = e.reason.into_string();
    if e.kind != sm_abi::ErrorKind::Panicked {
        return otherwise(reason);
    }
    match reason.strip_prefix(sm_abi::PANIC_PREFIX) {
        Some(msg) => Failure::Panic(msg.to_string()),
        None => Failure::Panic(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sm_abi::abi_stable::std_types::{RArc, RVec};
    use sm_abi::{path_sl_box, PathSl, SlTable, NONE};

    /// Its table says one thing, its pair-by-pair answer another.
    struct TwoFaced(SlTable);

    impl PathSl for TwoFaced {
        fn uniform(&self) -> ROption<u8> {
            ROption::RNone
        }
        fn path_sl(&self, _: u16, _: u16) -> u8 {
            7
        }
        fn sl_table(&self) -> ROption<RArc<SlTable>> {
            ROption::RSome(RArc::new(self.0.clone()))
        }
    }

    fn fabric(max_lid: u16) -> FabricSnapshot {
        FabricSnapshot { nodes: RVec::new(), ports: RVec::new(), lmc: 0, max_lid, sm_node: NONE }
    }

    fn routing(table: SlTable) -> Routing {
        let mut r = Routing::single_vl(Vec::new());
        r.path_sl = path_sl_box(TwoFaced(table));
        r
    }

    #[test]
    fn a_table_is_what_is_served_whatever_the_engine_answers_pair_by_pair() {
        let table = SlTable { class_of: vec![0, 0, 1].into(), classes: 2, sl: vec![0, 1, 2, 3].into() };
        let r = settle_sl_table(routing(table.clone()), &fabric(2)).expect("a table of the right shape");
        // (1 → 2) is destination class 1, source class 0: sl[2].
        assert_eq!((r.path_sl.path_sl(1, 2), r.path_sl.path_sl(2, 1), r.path_sl.path_sl(2, 2)), (2, 1, 3));
        assert_eq!(r.path_sl.sl_table().map(|t| (*t).clone()), ROption::RSome(table));
        // An oracle without a table is left as it is.
        let plain = settle_sl_table(Routing::single_vl(Vec::new()), &fabric(2)).expect("no table");
        assert_eq!((plain.path_sl.uniform(), plain.path_sl.sl_table().is_none()), (ROption::RSome(0), true));
    }

    #[test]
    fn a_table_of_the_wrong_shape_fails_the_engine_naming_what_is_wrong() {
        let short = SlTable { class_of: vec![0, 0].into(), classes: 1, sl: vec![0].into() };
        match settle_sl_table(routing(short), &fabric(2)) {
            Err(Failure::Error(why)) => assert!(why.contains("cover LIDs 0..2") && why.contains("up to 2"), "{why}"),
            other => panic!("expected a failure, got {:?}", other.map(|_| ())),
        }
    }
}
