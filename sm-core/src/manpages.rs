//! The manual pages: `smcore(8)` and one page per subcommand from the
//! command line's own definition (clap_mangen), and `smcore.toml(5)` from
//! `config/smcore.toml`, the file that states every default with its
//! comment, and from the table of OpenSM keys ([`crate::config::opensm::KEYS`]).
//! `smcore manpages DIR` writes them; `packaging/install.sh` installs them.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use roff::{bold, italic, roman, Roff};

use crate::config::opensm::{Support, KEYS};

/// The commented defaults file every key of `smcore.toml(5)` comes from.
pub const DEFAULTS: &str = include_str!("../../config/smcore.toml");

/// The manual's name in page headers.
const MANUAL: &str = "smcore manual";

/// Writes `smcore.8`, `smcore-<subcommand>.8` and `smcore.toml.5` into
/// `dir` (created if missing); returns the files written.
pub fn write_all(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let version = cmd.get_version().unwrap_or_default().to_string();
    let source = format!("smcore {version}");
    let mut written = Vec::new();
    let mut write = |name: String, text: Vec<u8>| -> io::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
        Ok(())
    };
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("smcore-{}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone().display_name(name.clone()).bin_name(format!("smcore {}", sub.get_name())))
            .section("8")
            .source(source.clone())
            .manual(MANUAL);
        let mut text = Vec::new();
        page.render(&mut text)?;
        text.extend(see_also(&["smcore(8)", "smcore.toml(5)"]).as_bytes());
        write(format!("{name}.8"), text)?;
    }
    let subcommands: Vec<String> =
        cmd.get_subcommands().filter(|s| !s.is_hide_set()).map(|s| format!("smcore-{}(8)", s.get_name())).collect();
    let main = clap_mangen::Man::new(cmd).section("8").source(source.clone()).manual(MANUAL);
    let mut text = Vec::new();
    main.render_title(&mut text)?;
    main.render_name_section(&mut text)?;
    main.render_synopsis_section(&mut text)?;
    text.extend(sm_description().as_bytes());
    main.render_options_section(&mut text)?;
    main.render_subcommands_section(&mut text)?;
    text.extend(sm_sections().as_bytes());
    let mut refs: Vec<&str> = vec!["smcore.toml(5)"];
    refs.extend(subcommands.iter().map(String::as_str));
    refs.extend(["opensm(8)", "ibsim(1)", "ibroute(8)"]);
    text.extend(see_also(&refs).as_bytes());
    main.render_version_section(&mut text)?;
    write("smcore.8".into(), text)?;
    let mut text = Vec::new();
    text.write_all(config_page(DEFAULTS, &version).as_bytes())?;
    write("smcore.toml.5".into(), text)?;
    Ok(written)
}

/// DESCRIPTION of smcore(8).
fn sm_description() -> String {
    let mut r = Roff::new();
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "smcore is an InfiniBand subnet manager. It discovers the fabric, assigns LIDs, routes it with \
         routing engines loaded at run time from shared libraries, verifies every routing before it \
         programs the switches, and serves the subnet administrator (SA), multicast, the performance \
         manager and master/standby election. Without a subcommand it runs the SM: on the umad port of ",
    ), bold("--device"), roman("/"), bold("--port"), roman(" (or "), bold("--guid"), roman(
        "), else the first active InfiniBand port, until SIGTERM; with ",
    ), bold("--fabric"), roman(" on an embedded simulated fabric read from a topology file; with "), bold("--once"),
        roman(" for one sweep.")]);
    r.control("PP", []);
    r.text([roman("The engine list ("), bold("--engines"), roman(", or the configuration's "), bold("routing_engine"),
        roman(") is tried in order, as OpenSM's routing_engine: the first engine whose routing passes \
         verification is programmed; minhop routes when all fail, unless "), bold("no_fallback"),
        roman(" is in the list. Engines are searched in "), bold("--engine-dir"), roman(", the configuration's "),
        bold("engine_dirs"), roman(", "), bold("SMCORE_ENGINE_PATH"), roman(" and the directory of the executable.")]);
    r.control("PP", []);
    r.text([roman("The configuration file ("), bold("--config"), roman(") is "), italic("smcore.toml"),
        roman(" (see "), bold("smcore.toml"), roman("(5)) or OpenSM's "), italic("opensm.conf"),
        roman(" as it is; flags override it.")]);
    r.to_roff()
}

/// EXIT STATUS, SIGNALS, ENVIRONMENT and FILES of smcore(8).
fn sm_sections() -> String {
    let mut r = Roff::new();
    let entry = |r: &mut Roff, tag: &str, text: &str| {
        r.control("TP", []);
        r.text([bold(tag)]);
        r.text([roman(text)]);
    };
    r.control("SH", ["EXIT STATUS"]);
    entry(&mut r, "0", "The SM stopped on SIGTERM or SIGINT, or a command succeeded.");
    entry(&mut r, "2", "Bad input: a file, the configuration, the engine list, or a port that is not InfiniBand. Not worth a restart.");
    entry(&mut r, "3", "No engine routed the fabric (--once, route).");
    entry(&mut r, "4", "The SM's port went away; the service manager restarts the SM.");
    r.control("SH", ["SIGNALS"]);
    entry(&mut r, "SIGHUP", "Rescan the engine directories, re-read the configuration file, sweep heavily (smcore ctl reload).");
    entry(&mut r, "SIGTERM, SIGINT", "Stop after the MAD in flight; programmed tables stay in the switches.");
    entry(&mut r, "SIGUSR1", "Reopen the log file (after logrotate moved it).");
    r.control("SH", ["ENVIRONMENT"]);
    entry(&mut r, "SMCORE_LOG", "Log filter, as --log.");
    entry(&mut r, "SMCORE_ENGINE_PATH", "Colon-separated engine directories, searched after --engine-dir and engine_dirs.");
    entry(&mut r, "SMCORE_SYSFS_ROOT", "The sysfs root the InfiniBand ports are read from (default /sys).");
    r.control("SH", ["FILES"]);
    entry(&mut r, "/etc/default/smcore", "SMCORE_OPTS: the flags the service units add, e.g. --config /etc/smcore/smcore.toml.");
    entry(&mut r, "/etc/smcore/smcore.toml", "The commented defaults as installed (see smcore.toml(5)); used when --config names it.");
    entry(&mut r, "/usr/lib/smcore/engines", "The engines the service units find (SMCORE_ENGINE_PATH).");
    entry(&mut r, "/run/smcore.sock", "The control socket smcore ctl talks to (--control-socket).");
    r.to_roff()
}

/// SEE ALSO naming `refs` (`name(section)`).
fn see_also(refs: &[&str]) -> String {
    let mut r = Roff::new();
    r.control("SH", ["SEE ALSO"]);
    let mut inlines = Vec::new();
    for (i, page) in refs.iter().enumerate() {
        let (name, section) = page.split_once('(').unwrap_or((page, ")"));
        if i > 0 {
            inlines.push(roman(", "));
        }
        inlines.push(bold(name));
        inlines.push(roman(format!("({section}")));
    }
    r.text(inlines);
    r.to_roff()
}

/// One key of the defaults file: its section (`None`: top level), the
/// line as written (`key = value`), whether it is set or shown commented
/// out, and the comment above it.
#[derive(Debug, PartialEq)]
struct DefaultKey {
    section: Option<String>,
    line: String,
    set: bool,
    comment: Vec<String>,
}

/// The keys of a defaults file in smcore.toml's style: `# text` comment
/// lines, then one or more `key = value` lines (set) or `# key = value`
/// lines (shown, not set); a comment belongs to the keys that follow it.
fn default_keys(text: &str) -> Vec<DefaultKey> {
    let mut keys = Vec::new();
    let mut section = None;
    let mut comment: Vec<String> = Vec::new();
    let mut last_was_key = false;
    let is_key = |s: &str| {
        let Some((k, _)) = s.split_once('=') else { return false };
        let k = k.trim();
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '"' || c == '-')
    };
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            if !last_was_key {
                comment.push(String::new());
            }
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = Some(name.to_string());
            comment.clear();
            last_was_key = false;
            continue;
        }
        let (body, set) = match line.strip_prefix('#') {
            Some(rest) => (rest.trim(), false),
            None => (line, true),
        };
        if is_key(body) {
            if !last_was_key && comment.iter().all(String::is_empty) {
                comment.clear();
            }
            let text = if last_was_key { keys.last().map(|k: &DefaultKey| k.comment.clone()).unwrap_or_default() } else { trim_blank(&comment) };
            keys.push(DefaultKey { section: section.clone(), line: body.to_string(), set, comment: text });
            last_was_key = true;
        } else {
            if last_was_key {
                comment.clear();
            }
            comment.push(body.to_string());
            last_was_key = false;
        }
    }
    keys
}

/// `lines` without blank lines at either end, and only from the last
/// paragraph break of a header that is not about the keys (a paragraph
/// ending in a blank line before a key belongs to the key).
fn trim_blank(lines: &[String]) -> Vec<String> {
    let start = lines.iter().rposition(String::is_empty).map_or(0, |i| {
        // The paragraph right above the key.
        if i + 1 < lines.len() {
            i + 1
        } else {
            lines[..i].iter().rposition(String::is_empty).map_or(0, |j| j + 1)
        }
    });
    lines[start..].iter().filter(|l| !l.is_empty()).cloned().collect()
}

/// `smcore.toml(5)` from the defaults file `defaults`.
fn config_page(defaults: &str, version: &str) -> String {
    let mut r = Roff::new();
    r.control("TH", ["SMCORE.TOML", "5", "", &format!("smcore {version}"), MANUAL]);
    r.control("SH", ["NAME"]);
    r.text([roman("smcore.toml - configuration of the smcore subnet manager")]);
    r.control("SH", ["SYNOPSIS"]);
    r.text([bold("smcore --config"), roman(" "), italic("/etc/smcore/smcore.toml")]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([roman(
        "A TOML file of defaults for the SM and the routing engines; every key is optional and command-line \
         flags override it. Keys are OpenSM's option names in snake case where one exists. A top-level key \
         the SM does not know is an engine option, given to every engine; a table ",
    ), bold("[engines.NAME]"), roman(
        " adds or overrides options for one engine. An error names the file and the line, and a running SM \
         that re-reads a broken file (SIGHUP) keeps the configuration in force.",
    )]);
    r.control("PP", []);
    r.text([roman("The same option given as "), italic("opensm.conf"), roman(
        " (OpenSM's own file, read as it is: one key and value per line) is accepted by --config too; the \
         file's format is told by name and content. See OPENSM.CONF below.",
    )]);
    r.control("SH", ["KEYS"]);
    r.text([roman("Each key with the default it takes when absent; a key shown as ")
        , italic("# key = value"), roman(" is not set by default (the value is an example).")]);
    let keys = default_keys(defaults);
    let mut section: Option<Option<String>> = None;
    let mut i = 0;
    while i < keys.len() {
        let key = &keys[i];
        if section.as_ref() != Some(&key.section) {
            if let Some(name) = &key.section {
                r.control("SS", [format!("[{name}]").as_str()]);
            }
            section = Some(key.section.clone());
        }
        // Keys under one comment share one entry: a tag line each.
        let group = keys[i..].iter().take_while(|k| k.section == key.section && k.comment == key.comment).count();
        for (j, k) in keys[i..i + group].iter().enumerate() {
            r.control(if j == 0 { "TP" } else { "TQ" }, []);
            r.text([bold(if k.set { k.line.clone() } else { format!("# {}", k.line) })]);
        }
        if !key.comment.is_empty() {
            r.text([roman(key.comment.join(" "))]);
        }
        i += group;
    }
    r.control("SH", ["OPENSM.CONF"]);
    r.text([roman(
        "Every key of OpenSM's opensm.conf is accepted. The keys smcore honours are below; the others are \
         accepted, do nothing, and are listed once at startup in one warning. A key OpenSM does not know is \
         an error naming file and line.",
    )]);
    let core: Vec<&str> = KEYS.iter().filter(|k| matches!(k.support, Support::Core(_))).map(|k| k.name).collect();
    r.control("PP", []);
    r.text([roman(format!("Read by the SM: {}.", core.join(", ")))]);
    r.control("PP", []);
    r.text([roman("Given to the routing engines as options:")]);
    for k in KEYS {
        if let Support::Engine(engines) = k.support {
            r.control("TP", []);
            r.text([bold(k.name)]);
            r.text([roman(format!("read by {engines}"))]);
        }
    }
    r.control("SH", ["FILES"]);
    r.control("TP", []);
    r.text([italic("/etc/smcore/smcore.toml")]);
    r.text([roman("The commented defaults as installed; the SM reads it when --config names it (for the service units, in SMCORE_OPTS of /etc/default/smcore).")]);
    r.control("SH", ["SEE ALSO"]);
    r.text([bold("smcore"), roman("(8), "), bold("opensm"), roman("(8)")]);
    r.to_roff()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_take_the_comment_above_them() {
        let text = "# header of the file\n# more header\n\n# The LMC.\nlmc = 0\n\n# Two keys\n# under one comment.\na = 1\nb = 2\n# c = \"x\"\n\n[verify]\n# Credit loops.\ncredit_loops = \"auto\"\n";
        let keys = default_keys(text);
        let names: Vec<(&str, bool)> = keys.iter().map(|k| (k.line.as_str(), k.set)).collect();
        assert_eq!(names, [("lmc = 0", true), ("a = 1", true), ("b = 2", true), ("c = \"x\"", false), ("credit_loops = \"auto\"", true)]);
        assert_eq!(keys[0].comment, ["The LMC."]);
        assert_eq!(keys[1].comment, ["Two keys", "under one comment."]);
        assert_eq!(keys[2].comment, keys[1].comment);
        assert_eq!(keys[4].section.as_deref(), Some("verify"));
        assert_eq!(keys[4].comment, ["Credit loops."]);
    }

    #[test]
    fn every_key_of_the_defaults_file_is_in_the_config_page() {
        let page = config_page(DEFAULTS, "0");
        let keys = default_keys(DEFAULTS);
        assert!(keys.len() >= 20, "{} keys", keys.len());
        for k in &keys {
            let name = k.line.split('=').next().unwrap_or_default().trim();
            assert!(page.contains(&name.replace('-', "\\-")), "{name} missing from smcore.toml(5)");
        }
        assert!(page.contains("routing_engine"));
        assert!(page.contains(".SH OPENSM.CONF"));
    }
}
