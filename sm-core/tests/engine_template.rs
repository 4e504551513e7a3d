//! engine-template/ builds out of tree against sm-abi and the kit by
//! version, passes its own conformance test, and loads into this smcore
//! (scripts/engine-template-check.sh does the work; this test makes the
//! normal test command run it). A failed build fails the test.
mod common;

use std::process::Command;

#[test]
fn the_engine_template_builds_out_of_tree_and_routes_in_smcore() {
    let script = common::workspace().join("scripts/engine-template-check.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_smcore"))
        .env("CARGO", env!("CARGO"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{} failed:\n{text}", script.display());
    assert!(text.contains("routed by template-minhop"), "{text}");
}
