//! GPU counts in Slurm's TRES request strings (`tres_per_node`, `tres_per_job`, …),
//! which `sbatch` fills from `--gres=gpu:a100:2`, `--gpus-per-node=2` or `--gpus=16`
//! as `gres:gpu:a100:2` (comma-separated with other TRES).

/// GPUs asked for in one TRES string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSpec {
    /// The GRES type (`a100`), when one was named and all entries agree.
    pub gres_type: Option<String>,
    /// How many.
    pub count: u32,
}

impl GpuSpec {
    /// The TRES string `sbatch` would send for this request.
    pub fn to_tres(&self) -> String {
        match &self.gres_type {
            Some(t) => format!("gres:gpu:{t}:{}", self.count),
            None => format!("gres:gpu:{}", self.count),
        }
    }

    /// `--gpus-per-node` style text for messages: `h100:8` or `8`.
    pub fn shown(&self) -> String {
        match &self.gres_type {
            Some(t) => format!("{t}:{}", self.count),
            None => self.count.to_string(),
        }
    }
}

/// A GPU request that cannot be read; its message is for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the GPU request `{entry}`: expected gpu[:type][:count]")]
pub struct GresError {
    /// The TRES entry as written.
    pub entry: String,
}

/// The GPU part of a TRES string; `Ok(None)` when it asks for no GPUs.
pub fn gpus(tres: &str) -> Result<Option<GpuSpec>, GresError> {
    let mut found: Option<GpuSpec> = None;
    for entry in tres.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let rest = entry.strip_prefix("gres:").or_else(|| entry.strip_prefix("gres/")).unwrap_or(entry);
        let mut parts = rest.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let fields: Vec<&str> = parts.collect();
        let bad = || GresError { entry: entry.to_string() };
        let (gres_type, count) = match fields.as_slice() {
            [] => (None, 1),
            [c] if c.bytes().all(|b| b.is_ascii_digit()) => (None, count(c).ok_or_else(bad)?),
            [t] => (Some(*t), 1),
            [t, c] => (Some(*t), count(c).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        if gres_type
            .is_some_and(|t| t.is_empty() || !t.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)))
        {
            return Err(bad());
        }
        found = Some(match found {
            None => GpuSpec { gres_type: gres_type.map(str::to_string), count },
            Some(f) => GpuSpec {
                gres_type: if f.gres_type.as_deref() == gres_type { f.gres_type } else { None },
                count: f.count.saturating_add(count),
            },
        });
    }
    // `--gres=gpu:0` asks for none.
    Ok(found.filter(|f| f.count > 0))
}

fn count(c: &str) -> Option<u32> {
    if c.is_empty() || c.len() > 6 || !c.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    c.parse().ok()
}

/// Replaces (or adds) the GPU entry of a TRES string, keeping its other entries.
pub fn with_gpus(tres: Option<&str>, spec: Option<&GpuSpec>) -> Option<String> {
    let mut out: Vec<String> = tres
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .filter(|e| {
            let rest = e.strip_prefix("gres:").or_else(|| e.strip_prefix("gres/")).unwrap_or(e);
            rest != "gpu" && !rest.starts_with("gpu:")
        })
        .map(str::to_string)
        .collect();
    if let Some(s) = spec {
        out.insert(0, s.to_tres());
    }
    (!out.is_empty()).then(|| out.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(t: Option<&str>, count: u32) -> Option<GpuSpec> {
        Some(GpuSpec { gres_type: t.map(str::to_string), count })
    }

    #[test]
    fn what_sbatch_sends() {
        assert_eq!(gpus("gres:gpu:2").unwrap(), spec(None, 2));
        assert_eq!(gpus("gres:gpu:a100:4").unwrap(), spec(Some("a100"), 4));
        assert_eq!(gpus("gres:gpu").unwrap(), spec(None, 1));
        assert_eq!(gpus("gres:gpu:h100").unwrap(), spec(Some("h100"), 1));
        assert_eq!(gpus("gres:shard:2,gres:gpu:h100:8").unwrap(), spec(Some("h100"), 8));
        assert_eq!(gpus("gres:gpu:a100:1,gres:gpu:h100:1").unwrap(), spec(None, 2));
        assert_eq!(gpus("gres:shard:2").unwrap(), None);
        assert_eq!(gpus("").unwrap(), None);
        assert_eq!(gpus("gres:gpu:0").unwrap(), None);
        assert!(gpus("gres:gpu:a:b:c").unwrap_err().to_string().contains("gpu[:type][:count]"));
        assert!(gpus("gres:gpu:a100:lots").is_err());
    }

    #[test]
    fn replacing_keeps_other_tres() {
        let s = GpuSpec { gres_type: Some("h100".into()), count: 8 };
        assert_eq!(with_gpus(Some("gres:shard:1,gres:gpu:2"), Some(&s)).unwrap(), "gres:gpu:h100:8,gres:shard:1");
        assert_eq!(with_gpus(None, Some(&s)).unwrap(), "gres:gpu:h100:8");
        assert_eq!(with_gpus(Some("gres:gpu:2"), None), None);
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,80}") {
            let _ = gpus(&s);
            let _ = gpus(&format!("gres:gpu:{s}"));
        }
    }
}
