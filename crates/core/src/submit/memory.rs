//! How much GPU memory a training or inference job needs, from its directive.
//!
//! State per parameter (mixed precision keeps fp32 master weights and Adam moments):
//!
//! | method | bytes per parameter |
//! |---|---|
//! | full, bf16/fp16/fp8 | 16 = 2 weights + 2 gradients + 4 master + 4 + 4 Adam moments |
//! | full, fp32 | 16 = 4 weights + 4 gradients + 4 + 4 Adam moments |
//! | lora | the weights at the given precision + 0.3 for adapters, their gradients and Adam state |
//! | qlora | 0.55 (4-bit weights with quantisation constants) + 0.3 |
//! | infer | the weights at the given precision |
//!
//! State is assumed sharded across every GPU of the job (FSDP / ZeRO-3). When `seq`
//! and `batch` are given, each GPU also holds activations: with activation
//! checkpointing (the norm for large fine-tunes), 2·s·b·h bytes per layer plus one
//! layer's working set of 34·s·b·h (Korthikanti et al., 2022); inference holds a KV
//! cache of 2·L·h·s·b values. The hidden size h and layer count L come from the
//! parameter count with GPT-style proportions (P ≈ 12·L·h², h ≈ 128·L). 10% of each
//! GPU is left for the CUDA context and fragmentation. These are estimates to catch
//! requests that cannot work, not a substitute for profiling.

use super::directive::{Directive, Method, Precision};

/// Share of a GPU's memory a job can use.
pub const USABLE: f64 = 0.9;

/// One job's memory needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Need {
    /// Weights, gradients and optimizer state, bytes, for the whole job (sharded).
    pub state: f64,
    /// Activations or KV cache per GPU, bytes.
    pub per_gpu: f64,
}

impl Need {
    /// Total bytes for `gpus` GPUs.
    pub fn total(&self, gpus: u32) -> f64 {
        self.state + self.per_gpu * f64::from(gpus)
    }

    /// Fewest GPUs of `memory_gb` each that hold this job; `None` if activations alone
    /// do not fit one GPU.
    pub fn min_gpus(&self, memory_gb: f64) -> Option<u32> {
        let room = memory_gb * 1e9 * USABLE - self.per_gpu;
        if room <= 0.0 {
            return None;
        }
        let n = (self.state / room).ceil().max(1.0);
        (n <= 1e6).then_some(n as u32)
    }
}

/// What the directive's job needs, or `None` when it gives no model size.
pub fn need(d: &Directive) -> Option<Need> {
    let params = d.params?;
    let method = d.method.unwrap_or(Method::Full);
    let precision = d.precision.unwrap_or(Precision::Bf16);
    let per_param = match method {
        Method::Full => 16.0,
        Method::Lora => precision.bytes() + 0.3,
        Method::Qlora => 0.55 + 0.3,
        Method::Infer => precision.bytes(),
    };
    let per_gpu = match (d.seq, d.batch) {
        (Some(s), Some(b)) => {
            let (h, layers) = shape(params);
            let sbh = f64::from(s) * f64::from(b) * h;
            match method {
                Method::Infer => 2.0 * layers * sbh * precision.bytes(),
                _ => sbh * (2.0 * layers + 34.0),
            }
        }
        _ => 0.0,
    };
    Some(Need { state: params * per_param, per_gpu })
}

/// Hidden size and layer count of a GPT-style model of `params` parameters.
fn shape(params: f64) -> (f64, f64) {
    let h = (128.0 * params / 12.0).cbrt();
    (h, (h / 128.0).max(1.0))
}

/// A byte count as `1.12 TB (1.02 TiB)`: decimal as vendors label GPUs, binary as
/// `nvidia-smi` reports them.
pub fn bytes(b: f64) -> String {
    let dec = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB")];
    let bin = [(1u64 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")];
    let (dv, du) = dec.iter().find(|(v, _)| b >= *v).copied().unwrap_or((1e6, "MB"));
    let (bv, bu) = bin.iter().find(|(v, _)| b >= *v as f64).copied().unwrap_or((1 << 20, "MiB"));
    format!("{:.2} {du} ({:.2} {bu})", b / dv, b / bv as f64)
}

/// GB as a GPU catalog states them: `320 GB`, `40.5 GB`.
pub fn gb(v: f64) -> String {
    format!("{} GB", trim(v))
}

/// `70B full fine-tune in bf16`, for messages.
pub fn describe(d: &Directive) -> String {
    let p = d.params.unwrap_or(0.0);
    let size = if p >= 1e12 {
        format!("{}T", trim(p / 1e12))
    } else if p >= 1e9 {
        format!("{}B", trim(p / 1e9))
    } else {
        format!("{}M", trim(p / 1e6))
    };
    let method = match d.method.unwrap_or(Method::Full) {
        Method::Full => "full fine-tune",
        Method::Lora => "LoRA fine-tune",
        Method::Qlora => "QLoRA fine-tune",
        Method::Infer => "inference",
    };
    let precision = match d.precision.unwrap_or(Precision::Bf16) {
        Precision::Bf16 => "bf16",
        Precision::Fp16 => "fp16",
        Precision::Fp32 => "fp32",
        Precision::Fp8 => "fp8",
    };
    format!("{size} {method} in {precision}")
}

/// What the state consists of, for messages.
pub fn state_words(d: &Directive) -> &'static str {
    match d.method.unwrap_or(Method::Full) {
        Method::Full => "weights, gradients and Adam state",
        Method::Lora | Method::Qlora => "frozen weights and adapter state",
        Method::Infer => "weights",
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::super::directive::parse;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seventy_b_full_fine_tune_is_16_bytes_per_parameter() {
        let d = parse("model=70b method=full precision=bf16").unwrap();
        let n = need(&d).unwrap();
        assert_eq!(n.state, 1.12e12);
        assert_eq!(bytes(n.state), "1.12 TB (1.02 TiB)");
        assert_eq!(describe(&d), "70B full fine-tune in bf16");
        // 1.12 TB over 72 usable GB per 80 GB GPU: 16 GPUs.
        assert_eq!(n.min_gpus(80.0), Some(16));
    }

    #[test]
    fn adapters_need_far_less() {
        let lora = need(&parse("model=70b method=lora").unwrap()).unwrap();
        let qlora = need(&parse("model=70b method=qlora").unwrap()).unwrap();
        assert_eq!(lora.min_gpus(80.0), Some(3));
        assert_eq!(qlora.min_gpus(80.0), Some(1));
        assert_eq!(need(&parse("model=7b method=infer").unwrap()).unwrap().min_gpus(24.0), Some(1));
    }

    #[test]
    fn activations_add_per_gpu_and_can_exceed_a_gpu() {
        let without = need(&parse("model=7b").unwrap()).unwrap();
        let with = need(&parse("model=7b seq=4k batch=2").unwrap()).unwrap();
        assert_eq!(with.state, without.state);
        assert!(with.per_gpu > 1e9 && with.per_gpu < 20e9, "{}", with.per_gpu);
        let huge = need(&parse("model=70b seq=1024k batch=64").unwrap()).unwrap();
        assert_eq!(huge.min_gpus(80.0), None);
    }

    proptest! {
        #[test]
        fn more_memory_never_needs_more_gpus(p in 1u32..2000, gb in 8u32..200) {
            let n = need(&parse(&format!("model={p}b seq=2k batch=1")).unwrap()).unwrap();
            if let (Some(a), Some(b)) = (n.min_gpus(f64::from(gb)), n.min_gpus(f64::from(gb) * 2.0)) {
                prop_assert!(b <= a);
                prop_assert!(n.total(a) <= f64::from(a) * f64::from(gb) * 1e9 * USABLE * 1.000001);
            }
        }
    }
}
