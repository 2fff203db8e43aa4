//! `slurm.conf` as Slurm reads it: each `Include` line replaced by the file it names.
//!
//! Slurm (`parse_config.c`) takes `Include FILE` at the start of a line, case-insensitive;
//! `%c` in FILE stands for the ClusterName set so far (lower case); a relative FILE is
//! relative to slurm.conf's own directory; included files may include others. Sites split
//! nodes and partitions into such files, so every reader of slurm.conf text in Fairway
//! (check-config's checks, job_submit/fairway's partitions) reads it through here.

use std::io;
use std::path::{Path, PathBuf};

/// How deep includes may nest before the file is taken to include itself.
const MAX_DEPTH: usize = 16;

/// Every `Key=Value` of slurm.conf-style text, in order (`#` comments dropped; keys as
/// written, so compare them case-insensitively as Slurm does).
pub fn settings(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .flat_map(|line| line.split('#').next().unwrap_or("").split_whitespace())
        .filter_map(|pair| pair.split_once('='))
}

/// The text of `path` with every `Include` expanded in place.
pub fn read(path: &Path) -> io::Result<String> {
    let dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut out = String::new();
    let mut cluster = None;
    expand(path, &dir, &mut cluster, 0, &mut out)?;
    Ok(out)
}

fn expand(path: &Path, dir: &Path, cluster: &mut Option<String>, depth: usize, out: &mut String) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!("{}: Include nested more than {MAX_DEPTH} deep", path.display())));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    for line in text.lines() {
        let body = line.split('#').next().unwrap_or("").trim();
        if let Some(file) = include_target(body) {
            let file = match cluster.as_deref() {
                Some(c) => file.replace("%c", c),
                None => file.to_string(),
            };
            let target = if file.starts_with('/') { PathBuf::from(file) } else { dir.join(file) };
            expand(&target, dir, cluster, depth + 1, out)?;
            continue;
        }
        if let Some((_, v)) = settings(body).filter(|(k, _)| k.eq_ignore_ascii_case("clustername")).last() {
            *cluster = Some(v.to_ascii_lowercase());
        }
        out.push_str(line);
        out.push('\n');
    }
    Ok(())
}

/// The file an `Include` line names, if `line` is one.
fn include_target(line: &str) -> Option<&str> {
    let head = line.get(..7)?;
    let rest = &line[7..];
    (head.eq_ignore_ascii_case("include") && rest.starts_with(char::is_whitespace))
        .then(|| rest.split_whitespace().next())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_expanded_in_place_relative_to_slurm_conf() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("conf.d")).unwrap();
        std::fs::write(
            d.join("slurm.conf"),
            "ClusterName=GPU\nInclude conf.d/nodes.conf\ninclude   /ABS/%c.conf # per cluster\nPriorityType=priority/fairway\n"
                .replace("/ABS", &d.display().to_string()),
        )
        .unwrap();
        std::fs::write(d.join("conf.d/nodes.conf"), "NodeName=c[1-2]\nInclude conf.d/parts.conf\n").unwrap();
        std::fs::write(d.join("conf.d/parts.conf"), "PartitionName=gpu Nodes=c[1-2]\n").unwrap();
        std::fs::write(d.join("gpu.conf"), "PartitionName=debug Nodes=c1\n").unwrap();
        let text = read(&d.join("slurm.conf")).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "ClusterName=GPU",
                "NodeName=c[1-2]",
                "PartitionName=gpu Nodes=c[1-2]",
                "PartitionName=debug Nodes=c1",
                "PriorityType=priority/fairway"
            ]
        );
        // IncludeX is a key, not an include; a missing file or a loop is an error
        assert_eq!(include_target("Includes=x"), None);
        std::fs::write(d.join("loop.conf"), "Include loop.conf\n").unwrap();
        assert!(read(&d.join("loop.conf")).unwrap_err().to_string().contains("nested"));
        std::fs::write(d.join("bad.conf"), "Include nowhere.conf\n").unwrap();
        assert!(read(&d.join("bad.conf")).unwrap_err().to_string().contains("nowhere.conf"));
    }
}
