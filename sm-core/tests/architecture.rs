//! The layout is the architecture (design.md, "How we write code"): the
//! modules of sm-core depend one way, down the data flow, and no two of
//! them import each other. Read from the sources: every `crate::` path and
//! `super::` path outside test code is an import of the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module's layer, lowest first: a module may import its
/// own layer's and lower ones, never a higher one.
const LAYERS: &[(&str, u8)] = &[
    // Utilities every layer may use.
    ("listener", 0),
    ("logging", 0),
    ("pidfile", 0),
    ("node_names", 0),
    // The small core: discovery, LIDs, programming.
    ("sweep", 1),
    // Routing: the engine chain, the accepted routing, its cache.
    ("engines", 2),
    ("routing", 2),
    ("report", 2),
    ("ucast_cache", 2),
    // Policies and the outputs of routing.
    ("mcast", 3),
    ("qos", 3),
    ("dump", 3),
    ("offline", 3),
    // The SA, on the model, the routing and the policies.
    ("sa", 4),
    // A path explained: the routing, walked as the SA walks it.
    ("explain", 4),
    // The standby's arbitration, on the core.
    ("standby", 5),
    // The configuration, made into each part's settings, and the heavy
    // sweep stage by stage, which takes them.
    ("config", 6),
    ("pipeline", 6),
    ("settings", 6),
    ("manpages", 6),
    // What runs the SM and shows it.
    ("perfmgr", 7),
    ("cc", 7),
    ("control", 7),
    ("doctor", 7),
    ("cabling", 7),
    ("metrics", 8),
    ("embedded", 8),
    ("daemon", 9),
    // Beside the SM in charge: the core's reading, the verifier, the
    // chain, the cabling check, explain, the console and the metrics.
    ("shadow", 9),
];

/// Imports up the data flow that are still there, each with why: the
/// test fails on any other, and on one of these once it is gone (then it
/// leaves this list).
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `.rs` files under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file (`sweep/lids.rs` → `sweep::lids`).
fn module_of(path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src()).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The code of `text` without comments and without its test module.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths after each `prefix` in `code`: `crate::a::b` gives
/// `[a, b]`; `use crate::a::{b, c::d}` gives `[a, b]` and `[a, c, d]`.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before_ok = rest[..i].chars().next_back().is_none_or(|c| !ident(c) && c != ':');
        rest = &rest[i + prefix.len()..];
        if !before_ok {
            continue;
        }
        let mut segs = Vec::new();
        let mut s = rest;
        loop {
            let end = s.find(|c: char| !ident(c)).unwrap_or(s.len());
            if end == 0 {
                break;
            }
            segs.push(s[..end].to_string());
            s = &s[end..];
            match s.strip_prefix("::") {
                Some(more) => s = more,
                None => break,
            }
        }
        if let Some(group) = s.strip_prefix('{') {
            let close = group.find('}').unwrap_or(group.len());
            for item in group[..close].split(',') {
                let item = item.split(" as ").next().unwrap_or_default().trim();
                if item.is_empty() || item == "self" {
                    continue;
                }
                let mut p = segs.clone();
                p.extend(item.split("::").map(|x| x.trim().to_string()));
                out.push(p);
            }
        }
        if !segs.is_empty() {
            out.push(segs);
        }
    }
    out
}

/// Module → modules it imports, at file granularity.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let modules: BTreeSet<String> = all.iter().map(|p| module_of(p).join("::")).collect();
    // The longest module a path starts with.
    let resolve = |path: &[String]| -> Option<String> {
        (1..=path.len()).rev().map(|k| path[..k].join("::")).find(|m| modules.contains(m))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &all {
        if file.file_name().is_some_and(|n| n == "main.rs") {
            continue; // the binary, on top of everything
        }
        let me = module_of(file);
        let name = me.join("::");
        let text = code(&std::fs::read_to_string(file).expect("read source"));
        let mut targets: Vec<Vec<String>> = paths_after(&text, "crate::");
        // `super::` from a file is its parent module.
        let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
        for p in paths_after(&text, "super::") {
            let mut full = parent.clone();
            full.extend(p);
            targets.push(full);
        }
        for t in targets {
            if let Some(m) = resolve(&t) {
                if m != name {
                    edges.entry(name.clone()).or_default().insert(m);
                }
            }
        }
    }
    edges
}

fn top(m: &str) -> &str {
    m.split("::").next().unwrap_or(m)
}

#[test]
fn the_reader_sees_the_imports_it_is_meant_to() {
    let code = "use crate::a::{b, c::d};\nfn f() { crate::x::y(); my_crate::z(); }\n// crate::comment\n";
    let found = paths_after(&self::code(code), "crate::");
    assert!(found.contains(&vec!["a".into(), "b".into()]), "{found:?}");
    assert!(found.contains(&vec!["a".into(), "c".into(), "d".into()]), "{found:?}");
    assert!(found.contains(&vec!["x".into(), "y".into()]), "{found:?}");
    assert!(!found.iter().any(|p| p[0] == "z" || p[0] == "comment"), "{found:?}");
    let edges = imports();
    // Edges this reader must see, or it sees nothing.
    assert!(edges["daemon"].contains("control"), "{:?}", edges.get("daemon"));
    assert!(edges["pipeline"].iter().any(|b| b.starts_with("sweep")), "{:?}", edges.get("pipeline"));
}

#[test]
fn no_two_modules_import_each_other() {
    let edges = imports();
    let mut top_edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (a, bs) in &edges {
        for b in bs {
            if top(a) != top(b) {
                top_edges.entry(top(a)).or_default().insert(top(b));
            }
        }
    }
    // An edge a → b with a path from b back to a is a circle.
    for (&a, bs) in &top_edges {
        for &b in bs {
            let mut seen = BTreeSet::new();
            let mut stack = vec![vec![a, b]];
            while let Some(path) = stack.pop() {
                let m = *path.last().expect("a path");
                if m == a {
                    panic!("circle: {}", path.join(" → "));
                }
                if seen.insert(m) {
                    for &n in top_edges.get(m).into_iter().flatten() {
                        let mut p = path.clone();
                        p.push(n);
                        stack.push(p);
                    }
                }
            }
        }
    }
}

#[test]
fn modules_import_only_their_own_layer_and_lower_ones() {
    let layer: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let edges = imports();
    let mut upward = Vec::new();
    let mut known_seen = BTreeSet::new();
    for (a, bs) in &edges {
        let Some(&la) = layer.get(top(a)) else { panic!("module {a} has no layer in LAYERS") };
        for b in bs {
            let Some(&lb) = layer.get(top(b)) else { panic!("module {b} has no layer in LAYERS") };
            if lb > la {
                match KNOWN_UPWARD.iter().find(|(from, to, _)| from == a && to == b) {
                    Some(known) => {
                        known_seen.insert(known.0);
                    }
                    None => upward.push(format!("{a} (layer {la}) imports {b} (layer {lb})")),
                }
            }
        }
    }
    assert!(upward.is_empty(), "imports up the data flow:\n{}", upward.join("\n"));
    for (from, to, _) in KNOWN_UPWARD {
        assert!(known_seen.contains(from), "{from} no longer imports {to}: take it out of KNOWN_UPWARD");
    }
}

/// The small core (crate sm-sweep: discovery, LIDs, programming) stays
/// small enough to read: under 10,000 lines, tests included.
#[test]
fn the_small_core_stays_small() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sweep/src");
    let mut sources = Vec::new();
    files(&dir, &mut sources);
    assert!(sources.len() >= 8, "the core's sources: {sources:?}");
    let lines: usize = sources.iter().map(|p| std::fs::read_to_string(p).expect("read").lines().count()).sum();
    assert!(lines < 10_000, "sm-sweep has {lines} lines");
}
