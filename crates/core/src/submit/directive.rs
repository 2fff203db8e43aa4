//! The workload directive users put in `--comment` (or `--extra` where sbatch has it):
//!
//! ```text
//! fairway: model=70b method=full precision=bf16 seq=4k batch=1 ckpt=5m tier=batch time=auto
//! ```
//!
//! It starts at `fairway:` (anywhere in the text, so other tools' notes can share the
//! comment) and runs to the end of the text or to a `;`. Keys, all optional:
//!
//! | key | values | meaning |
//! |---|---|---|
//! | `model` | `350m`, `7b`, `1.5b`, `70b`, `1t` | parameters (m = 10^6, b = 10^9, t = 10^12) |
//! | `method` | `full`, `lora`, `qlora`, `infer` | full fine-tune / pre-training with Adam, adapters, 4-bit adapters, inference |
//! | `precision` | `bf16`, `fp16`, `fp32`, `fp8` | compute precision |
//! | `seq` | `2048`, `4k` (k = 1024) | sequence length in tokens |
//! | `batch` | `1`..`4096` | micro-batch per GPU |
//! | `ckpt` | `300s`, `5m`, `1h`, `300` | how long a checkpoint takes to write |
//! | `tier` | `interactive`, `batch`, `opportunistic` | the workload tier (default QoS) |
//! | `time` | `auto` | let Fairway set `--time` from the runtime prediction |
//!
//! Parsing is strict: the user's text is never changed, and anything unknown is an
//! error that names the key and the accepted values, so a typo fails at `sbatch` rather
//! than silently doing nothing.

use std::fmt;

/// Longest directive accepted, in bytes: room for every key, small enough to log.
pub const MAX_LEN: usize = 256;

const PREFIX: &str = "fairway:";

/// Training method: how much state per parameter lives in GPU memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Full fine-tune or pre-training with Adam.
    Full,
    /// LoRA adapters over frozen weights.
    Lora,
    /// LoRA over 4-bit quantised weights.
    Qlora,
    /// Inference only.
    Infer,
}

/// Compute precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// bfloat16 mixed precision.
    Bf16,
    /// float16 mixed precision.
    Fp16,
    /// float32.
    Fp32,
    /// 8-bit floating point (Transformer Engine).
    Fp8,
}

impl Precision {
    /// Bytes per weight stored at this precision.
    pub fn bytes(self) -> f64 {
        match self {
            Self::Fp32 => 4.0,
            Self::Bf16 | Self::Fp16 => 2.0,
            Self::Fp8 => 1.0,
        }
    }
}

/// Workload tier, which picks the default QoS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Short, attended work.
    Interactive,
    /// Ordinary batch training.
    Batch,
    /// Sweeps and other work that may be preempted.
    Opportunistic,
}

/// A parsed directive. Absent keys are `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Directive {
    /// Parameters.
    pub params: Option<f64>,
    /// Training method.
    pub method: Option<Method>,
    /// Compute precision.
    pub precision: Option<Precision>,
    /// Sequence length in tokens.
    pub seq: Option<u32>,
    /// Micro-batch per GPU.
    pub batch: Option<u32>,
    /// Checkpoint duration in seconds.
    pub ckpt: Option<u32>,
    /// Workload tier.
    pub tier: Option<Tier>,
    /// `time=auto`.
    pub time_auto: bool,
}

/// Why a directive was refused; shown to the user as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectiveError(pub String);

impl fmt::Display for DirectiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fairway directive: {}", self.0)
    }
}

impl std::error::Error for DirectiveError {}

const KEYS: &[&str] = &["model", "method", "precision", "seq", "batch", "ckpt", "tier", "time"];

/// Finds and parses the directive in a job's comment; `Ok(None)` when there is none.
pub fn find(text: &str) -> Result<Option<Directive>, DirectiveError> {
    let Some(start) = text.find(PREFIX) else { return Ok(None) };
    let body = &text[start + PREFIX.len()..];
    let body = body.split(';').next().unwrap_or("");
    parse(body).map(Some)
}

/// Parses the text after `fairway:`.
pub fn parse(body: &str) -> Result<Directive, DirectiveError> {
    let err = |m: String| Err(DirectiveError(m));
    if body.len() > MAX_LEN {
        return err(format!("{} bytes is too long (at most {MAX_LEN})", body.len()));
    }
    if let Some(c) = body.chars().find(|c| !c.is_ascii() || (c.is_ascii_control() && *c != '\t')) {
        return err(format!("unexpected character {c:?}: use plain ASCII `key=value` words"));
    }
    let mut d = Directive::default();
    let mut seen: Vec<&str> = Vec::new();
    for word in body.split_ascii_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            return err(format!("`{word}` is not `key=value` (keys: {})", KEYS.join(", ")));
        };
        if seen.contains(&key) {
            return err(format!("`{key}` is given twice"));
        }
        seen.push(key);
        let bad = |accepted: &str| DirectiveError(format!("`{key}={value}` is not valid: expected {accepted}"));
        match key {
            "model" => d.params = Some(parse_params(value).ok_or_else(|| bad("a size such as 350m, 7b, 1.5b or 70b"))?),
            "method" => {
                d.method = Some(match value {
                    "full" => Method::Full,
                    "lora" => Method::Lora,
                    "qlora" => Method::Qlora,
                    "infer" => Method::Infer,
                    _ => return Err(bad("full, lora, qlora or infer")),
                })
            }
            "precision" => {
                d.precision = Some(match value {
                    "bf16" => Precision::Bf16,
                    "fp16" => Precision::Fp16,
                    "fp32" => Precision::Fp32,
                    "fp8" => Precision::Fp8,
                    _ => return Err(bad("bf16, fp16, fp32 or fp8")),
                })
            }
            "seq" => {
                d.seq = Some(parse_count(value, 1024, 1 << 20).ok_or_else(|| bad("tokens, 1 to 1024k (k = 1024)"))?)
            }
            "batch" => d.batch = Some(parse_count(value, 1, 4096).ok_or_else(|| bad("a micro-batch of 1 to 4096"))?),
            "ckpt" => {
                d.ckpt = Some(parse_secs(value).ok_or_else(|| bad("a duration such as 300s, 5m or 1h (at most 6h)"))?)
            }
            "tier" => {
                d.tier = Some(match value {
                    "interactive" => Tier::Interactive,
                    "batch" => Tier::Batch,
                    "opportunistic" => Tier::Opportunistic,
                    _ => return Err(bad("interactive, batch or opportunistic")),
                })
            }
            "time" => {
                if value != "auto" {
                    return Err(bad("auto (set limits with --time)"));
                }
                d.time_auto = true;
            }
            _ => {
                let hint =
                    KEYS.iter().find(|k| close(k, key)).map(|k| format!("did you mean `{k}`? ")).unwrap_or_default();
                return err(format!("unknown key `{key}`: {hint}known keys are {}", KEYS.join(", ")));
            }
        }
    }
    if d.method.is_some() && d.params.is_none() {
        return err("`method` needs `model=<size>` to size GPU memory".into());
    }
    Ok(d)
}

/// `7b`, `1.5b`, `350m`, `1t` → parameters; between 1M and 100T.
fn parse_params(v: &str) -> Option<f64> {
    let (num, unit) = v.split_at(v.len().checked_sub(1)?);
    let scale = match unit {
        "m" | "M" => 1e6,
        "b" | "B" => 1e9,
        "t" | "T" => 1e12,
        _ => return None,
    };
    if num.is_empty() || num.len() > 8 || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let p = num.parse::<f64>().ok()? * scale;
    (1e6..=1e14).contains(&p).then_some(p)
}

/// A count with an optional `k` (× `k`), in `1..=max`.
fn parse_count(v: &str, k: u32, max: u32) -> Option<u32> {
    let (num, mul) = match v.strip_suffix(['k', 'K']) {
        Some(n) if k > 1 => (n, k),
        _ => (v, 1),
    };
    if num.is_empty() || num.len() > 7 || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = num.parse::<u32>().ok()?.checked_mul(mul)?;
    (1..=max).contains(&n).then_some(n)
}

/// `300`, `300s`, `5m`, `1h` → seconds, 1 s to 6 h.
fn parse_secs(v: &str) -> Option<u32> {
    let (num, mul) = match v.as_bytes().last()? {
        b's' => (&v[..v.len() - 1], 1),
        b'm' => (&v[..v.len() - 1], 60),
        b'h' => (&v[..v.len() - 1], 3600),
        _ => (v, 1),
    };
    if num.is_empty() || num.len() > 6 || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let s = num.parse::<u32>().ok()?.checked_mul(mul)?;
    (1..=6 * 3600).contains(&s).then_some(s)
}

/// A likely typo: at most one insertion, deletion, substitution or swap of neighbours
/// (optimal string alignment distance ≤ 1).
fn close(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()] <= 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_documented_example_parses() {
        let d = find("fairway: model=70b method=full precision=bf16 ckpt=300s").unwrap().unwrap();
        assert_eq!(d.params, Some(70e9));
        assert_eq!(d.method, Some(Method::Full));
        assert_eq!(d.precision, Some(Precision::Bf16));
        assert_eq!(d.ckpt, Some(300));
        assert!(!d.time_auto);
    }

    #[test]
    fn every_key_and_unit() {
        let d = parse(" model=1.5b method=qlora precision=fp8 seq=4k batch=8 ckpt=2m tier=opportunistic time=auto")
            .unwrap();
        assert_eq!((d.params, d.seq, d.batch, d.ckpt), (Some(1.5e9), Some(4096), Some(8), Some(120)));
        assert_eq!((d.method, d.tier, d.time_auto), (Some(Method::Qlora), Some(Tier::Opportunistic), true));
        assert_eq!(parse("model=350m").unwrap().params, Some(350e6));
        assert_eq!(parse("ckpt=1h").unwrap().ckpt, Some(3600));
        assert_eq!(parse("ckpt=90").unwrap().ckpt, Some(90));
        assert_eq!(parse("").unwrap(), Directive::default());
    }

    #[test]
    fn comments_without_a_directive_are_left_alone() {
        assert_eq!(find("nightly eval run").unwrap(), None);
        assert_eq!(find("").unwrap(), None);
        let d = find("ticket 42; fairway: tier=batch; owner=ml-infra").unwrap().unwrap();
        assert_eq!(d.tier, Some(Tier::Batch));
    }

    #[test]
    fn errors_name_the_key_and_what_is_accepted() {
        let e = find("fairway: modle=7b").unwrap_err().to_string();
        assert_eq!(e, "fairway directive: unknown key `modle`: did you mean `model`? known keys are model, method, precision, seq, batch, ckpt, tier, time");
        let e = parse("method=fulll model=7b").unwrap_err().0;
        assert_eq!(e, "`method=fulll` is not valid: expected full, lora, qlora or infer");
        assert!(parse("model=7").unwrap_err().0.contains("350m, 7b"));
        assert!(parse("model=7b model=8b").unwrap_err().0.contains("twice"));
        assert!(parse("tier").unwrap_err().0.contains("not `key=value`"));
        assert!(parse("method=full").unwrap_err().0.contains("needs `model="));
        assert!(parse("ckpt=7h").unwrap_err().0.contains("at most 6h"));
        assert!(parse("time=2:00:00").unwrap_err().0.contains("--time"));
        assert!(parse("model=7b\u{e9}").unwrap_err().0.contains("ASCII"));
        assert!(parse(&"tier=batch ".repeat(30)).unwrap_err().0.contains("too long"));
        assert!(parse("seq=0").is_err() && parse("batch=99999").is_err() && parse("model=0.0001m").is_err());
    }

    proptest! {
        #[test]
        fn no_input_panics(s in ".{0,400}") {
            let _ = find(&s);
            let _ = find(&format!("fairway:{s}"));
        }

        #[test]
        fn well_formed_sizes_round_trip(n in 1u32..100_000, unit in prop::sample::select(vec!['m', 'b'])) {
            let scale = if unit == 'm' { 1e6 } else { 1e9 };
            let d = parse(&format!("model={n}{unit}")).unwrap();
            prop_assert_eq!(d.params, Some(n as f64 * scale));
        }
    }
}
