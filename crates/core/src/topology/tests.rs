use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::select::{choose, score, ChooseError, Score};
use super::*;

const SHIPPED: [&str; 5] =
    ["dgx-h100.toml", "hgx-a100.toml", "pcie-a100-nvlink-pairs.toml", "pcie-l40s.toml", "a100-pcie-mig.toml"];

fn shipped_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/topology").join(name)
}

fn shipped(name: &str) -> Topology {
    Topology::load(&shipped_path(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn invalid(text: &str) -> crate::config::Invalid {
    match Topology::parse(text, Path::new("node.toml")) {
        Err(e) => e.invalid().cloned().unwrap_or_else(|| panic!("{e}")),
        Ok(t) => panic!("expected an error, got {t:?}"),
    }
}

/// The pairs node with `edit` applied to its text, to make bad files from a good one.
fn pairs_with(edit: impl Fn(&str) -> String) -> String {
    edit(&std::fs::read_to_string(shipped_path("pcie-a100-nvlink-pairs.toml")).unwrap())
}

#[test]
fn every_shipped_topology_parses_and_round_trips() {
    for name in SHIPPED {
        let t = shipped(name);
        assert!(t.gpus.len() >= 4, "{name}");
        let text = t.to_toml();
        let back = Topology::parse(&text, Path::new(name)).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(back, t, "{name}");
    }
}

#[test]
fn shipped_topologies_say_what_they_model() {
    let dgx = shipped("dgx-h100.toml");
    assert_eq!(dgx.cpu.cores(), 112);
    assert!(dgx.nvlink.via_switch());
    assert_eq!(dgx.nvlink.lanes(0, 7), 18);
    assert_eq!(dgx.gpus[4].cores.to_string(), "56-111");
    assert_eq!(dgx.gpus[0].autodetect_type(), "nvidia_h100_80gb_hbm3");
    let hgx = shipped("hgx-a100.toml");
    assert_eq!((hgx.numa.len(), hgx.nvlink.lanes(2, 5)), (8, 12));
    assert_eq!(hgx.gpus[0].cores.to_string(), "48-63");
    assert_eq!(hgx.socket_of_gpu(6), 1);
    let l40s = shipped("pcie-l40s.toml");
    assert!((0..8).all(|i| (0..8).all(|j| l40s.nvlink.lanes(i, j) == 0)));
    assert_eq!(l40s.link_label(0, 1), "NODE");
    assert_eq!(l40s.link_label(0, 4), "SYS");
    assert_eq!(dgx.link_label(0, 4), "NV18");
}

#[test]
fn gres_conf_for_dgx_h100() {
    let dgx = shipped("dgx-h100.toml");
    let stat = dgx.gres_conf(GresStyle::Static);
    assert_eq!(stat[0], "Name=gpu Type=h100 File=/dev/nvidia0 Cores=0-55 Links=-1,18,18,18,18,18,18,18");
    assert_eq!(stat[5], "Name=gpu Type=h100 File=/dev/nvidia5 Cores=56-111 Links=18,18,18,18,18,-1,18,18");
    // Through NVSwitch NVML sees the switch at the far end of every lane, so
    // autodetect counts no lane to any peer GPU.
    let auto = dgx.gres_conf(GresStyle::Autodetect);
    assert_eq!(auto[0], "Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia0 Cores=0-55 Links=-1,0,0,0,0,0,0,0");
    assert_eq!(auto[7], "Name=gpu Type=nvidia_h100_80gb_hbm3 File=/dev/nvidia7 Cores=56-111 Links=0,0,0,0,0,0,0,-1");
}

#[test]
fn gres_conf_for_pcie_pairs() {
    let t = shipped("pcie-a100-nvlink-pairs.toml");
    assert_eq!(
        t.gres_conf(GresStyle::Static),
        [
            "Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-31 Links=-1,12,0,0",
            "Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-31 Links=12,-1,0,0",
            "Name=gpu Type=a100 File=/dev/nvidia2 Cores=32-63 Links=0,0,-1,12",
            "Name=gpu Type=a100 File=/dev/nvidia3 Cores=32-63 Links=0,0,12,-1",
        ]
    );
    // Bridges end on the peer GPU, so autodetect sees the same lanes.
    assert_eq!(
        t.gres_conf(GresStyle::Autodetect)[0],
        "Name=gpu Type=nvidia_a100_80gb_pcie File=/dev/nvidia0 Cores=0-31 Links=-1,12,0,0"
    );
}

#[test]
fn a_gpu_in_mig_mode_is_one_record_per_instance_as_slurm_reports_it() {
    let t = shipped("a100-pcie-mig.toml");
    assert_eq!(t.gpus[0].mig.len(), 4);
    let gres = t.gres_gpus(GresStyle::Fairway);
    assert_eq!(gres.len(), 7);
    assert_eq!(
        gres[0],
        GresGpu {
            type_name: "nvidia_a100_80gb_pcie_3g.40gb".into(),
            file: "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22".into(),
            cores: "0-31".into(),
            links: "-1,0,0,0".into(),
            unique_id: Some("MIG-5e6b1a90-0000-4000-8000-000000000a02".into()),
        }
    );
    // gres_links_create_empty(j, count): the instance's place among its GPU's.
    assert_eq!(gres[3].links, "0,0,0,-1");
    assert_eq!(
        (gres[4].file.as_str(), gres[4].links.as_str(), gres[4].unique_id.as_deref()),
        ("/dev/nvidia1", "0,-1,0,0", None)
    );
    // Hand-written gres.conf: several files per GPU go in MultipleFiles=.
    assert_eq!(
        t.gres_conf(GresStyle::Static)[1],
        "Name=gpu Type=a100_2g.20gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30,/dev/nvidia-caps/nvidia-cap31 \
         Cores=0-31 Links=0,-1,0,0"
    );
}

#[test]
fn mig_profiles_and_uuids_are_checked() {
    let mig = |profile: &str, uuid: &str| {
        pairs_with(|t| {
            t.replacen(
                "numa = 0\n",
                &format!("numa = 0\n[[gpu.mig]]\nprofile = \"{profile}\"\nuuid = \"{uuid}\"\ngi_cap_minor = 21\nci_cap_minor = 22\n"),
                1,
            )
        })
    };
    assert!(Topology::parse(&mig("1g.10gb", "MIG-x"), Path::new("x")).is_ok());
    let i = invalid(&mig("1g.10gb+me", "MIG-x"));
    assert_eq!(i.key.as_deref(), Some("gpu[0].mig[0].profile"));
    assert!(i.message.contains("<slices>g.<GB>gb"), "{}", i.message);
    let i = invalid(&mig("3g.40gb", "GPU-x"));
    assert_eq!(i.key.as_deref(), Some("gpu[0].mig[0].uuid"));
    assert!(i.message.contains("starts with \"MIG-\""), "{}", i.message);
    let i = invalid(&mig("3g.40gb", "MIG-x").replace("gi_cap_minor = 21\n", ""));
    assert!(i.message.contains("gi_cap_minor"), "{}", i.message);
}

#[test]
fn minor_numbers_other_than_the_index_are_kept() {
    let text = pairs_with(|t| {
        t.replacen("numa = 0\n", "numa = 0\nminor = 1\n", 1).replacen("index = 1\n", "index = 1\nminor = 0\n", 1)
    });
    let t = Topology::parse(&text, Path::new("x")).unwrap();
    assert_eq!(t.gpus[0].device_file(), "/dev/nvidia1");
    assert!(t.gres_conf(GresStyle::Static)[1].contains("File=/dev/nvidia0 "));
    assert_eq!(Topology::parse(&t.to_toml(), Path::new("x")).unwrap(), t);
}

#[test]
fn unknown_key_names_line_and_key() {
    let text = pairs_with(|t| t.replacen("numa = 1\n", "numa = 1\nnvlinks = 3\n", 1));
    let i = invalid(&text);
    assert_eq!(i.key.as_deref(), Some("gpu[2].nvlinks"));
    assert_eq!(text.lines().nth(i.line - 1), Some("nvlinks = 3"));
    assert!(i.message.contains("unknown field `nvlinks`"), "{}", i.message);
}

#[test]
fn wrong_type_names_line_and_key() {
    let text = pairs_with(|t| t.replacen("memory_mib = 81920", "memory_mib = \"80GB\"", 1));
    let i = invalid(&text);
    assert_eq!(i.key.as_deref(), Some("gpu[0].memory_mib"));
    assert_eq!(text.lines().nth(i.line - 1), Some("memory_mib = \"80GB\""));
}

#[test]
fn asymmetric_links_are_refused_on_their_row() {
    let text = pairs_with(|t| t.replace("[12, -1, 0, 0]", "[12, -1, 0, 4]"));
    let i = invalid(&text);
    assert_eq!(i.key.as_deref(), Some("nvlink.lanes[1]"));
    assert_eq!(text.lines().nth(i.line - 1).map(str::trim), Some("[12, -1, 0, 4],"));
    assert!(i.message.contains("not symmetric: GPU 1 has 4 lanes to GPU 3 but GPU 3 has 0"), "{}", i.message);
    let shown = TopologyError::Invalid(Box::new(i.clone())).to_string();
    assert!(shown.starts_with(&format!("node.toml:{}:5: key `nvlink.lanes[1]`: ", i.line)), "{shown}");
}

#[test]
fn link_matrix_shape_and_values_are_checked() {
    let i = invalid(&pairs_with(|t| t.replace("[-1, 12, 0, 0]", "[0, 12, 0, 0]")));
    assert!(i.message.contains("must be -1"), "{}", i.message);
    let i = invalid(&pairs_with(|t| t.replace("[0, 0, 12, -1],\n", "")));
    assert_eq!(i.key.as_deref(), Some("nvlink.lanes"));
    assert!(i.message.contains("3 rows for 4 GPUs"), "{}", i.message);
    let i = invalid(&pairs_with(|t| {
        t.replace("[-1, 12, 0, 0]", "[-1, 12, 9, 0]").replace("[0, 0, -1, 12]", "[9, 0, -1, 12]")
    }));
    assert!(i.message.contains("21 lanes in all"), "{}", i.message);
    let i = invalid(&pairs_with(|t| t.replace("lanes = [", "switch_lanes = 12\nlanes = [")));
    assert!(i.message.contains("not both"), "{}", i.message);
}

#[test]
fn indexes_numa_and_cores_are_checked() {
    let text = pairs_with(|t| t.replacen("index = 2", "index = 3", 1));
    let i = invalid(&text);
    assert_eq!(i.key.as_deref(), Some("gpu[2].index"));
    assert_eq!(text.lines().nth(i.line - 1), Some("index = 3"));

    let text = pairs_with(|t| t.replacen("numa = 1\n", "numa = 4\n", 1));
    let i = invalid(&text);
    assert_eq!(i.key.as_deref(), Some("gpu[2].numa"));
    assert!(i.message.contains("NUMA node 4 is not declared"), "{}", i.message);

    let i = invalid(&pairs_with(|t| t.replacen("cores = \"32-63\"", "cores = \"32-64\"", 1)));
    assert_eq!(i.key.as_deref(), Some("numa[1].cores"));
    assert!(i.message.contains("core 64 is not in socket 1, whose abstract core ids are 32-63"), "{}", i.message);

    let i = invalid(&pairs_with(|t| t.replacen("numa = 0\n", "numa = 0\ncores = \"0-70\"\n", 1)));
    assert_eq!(i.key.as_deref(), Some("gpu[0].cores"));
    assert!(i.message.contains("core 64 does not exist: the node has 64 cores (0-63)"), "{}", i.message);

    let i = invalid(&pairs_with(|t| t.replacen("cores = \"0-31\"", "cores = \"0-3x\"", 1)));
    assert_eq!(i.key.as_deref(), Some("numa[0].cores"));
    assert!(i.message.contains("is not a core id or range"), "{}", i.message);

    let i = invalid(&pairs_with(|t| t.replacen("socket = 1", "socket = 2", 1)));
    assert!(i.message.contains("socket 2 does not exist"), "{}", i.message);
}

#[test]
fn bus_ids_uuids_and_order_are_checked() {
    let i = invalid(&pairs_with(|t| t.replacen("00000000:B1:00.0", "0000:b1:00.0", 1)));
    assert_eq!(i.key.as_deref(), Some("gpu[2].pci_bus_id"));
    assert!(i.message.contains("NVML's form"), "{}", i.message);
    let i = invalid(&pairs_with(|t| t.replacen("00000000:B1:00.0", "00000000:10:00.0", 1)));
    assert!(i.message.contains("PCI bus id order"), "{}", i.message);
    let i = invalid(&pairs_with(|t| t.replacen("000000000001\"", "000000000000\"", 1)));
    assert_eq!(i.key.as_deref(), Some("gpu[1].uuid"));
}

#[test]
fn missing_sections_are_explained() {
    let i = invalid("[cpu]\nsockets = 1\ncores_per_socket = 8\nthreads_per_core = 1\n");
    assert!(i.message.contains("missing field `numa`"), "{}", i.message);
    let i = invalid("gpu = []\n[cpu]\nsockets = 1\ncores_per_socket = 8\nthreads_per_core = 1\n[[numa]]\nid = 0\nsocket = 0\ncores = \"0-7\"\n");
    assert!(i.message.contains("at least one GPU"), "{}", i.message);
}

// --- selection ---------------------------------------------------------------------

fn all(t: &Topology) -> Vec<usize> {
    (0..t.gpus.len()).collect()
}

fn but(t: &Topology, busy: &[usize]) -> Vec<usize> {
    all(t).into_iter().filter(|g| !busy.contains(g)).collect()
}

#[test]
fn pairs_node_gives_a_bridged_pair() {
    let t = shipped("pcie-a100-nvlink-pairs.toml");
    let c = choose(&t, &all(&t), 2).unwrap();
    assert_eq!((c.gpus.as_slice(), c.cores.to_string().as_str()), (&[0, 1][..], "0-31"));
    assert_eq!(c.score.lanes, 12);
    let c = choose(&t, &but(&t, &[1]), 2).unwrap();
    assert_eq!((c.gpus.as_slice(), c.cores.to_string().as_str()), (&[2, 3][..], "32-63"));
    // Only unbridged GPUs left: no pair is connected, so stay on one socket if possible.
    let c = choose(&t, &but(&t, &[1, 3]), 2).unwrap();
    assert_eq!(c.gpus, [0, 2]);
    assert_eq!(c.score.disconnected_pairs, 1);
}

#[test]
fn dgx_four_gpus_with_0_and_1_busy_take_the_whole_other_socket() {
    // 2 and 3 are the only free GPUs on socket 0, so "2, 3 and two more" would span
    // both sockets; socket 1 has four free GPUs, and taking them leaves 2 and 3 together
    // for a later 2-GPU job on socket 0.
    let t = shipped("dgx-h100.toml");
    let c = choose(&t, &but(&t, &[0, 1]), 4).unwrap();
    assert_eq!(c.gpus, [4, 5, 6, 7]);
    assert_eq!(c.cores.to_string(), "56-111");
    assert_eq!((c.score.sockets, c.score.disconnected_pairs, c.score.lanes), (1, 0, 6 * 18));
    // With one socket-1 GPU busy too there is no single-socket set: NVLink is everywhere,
    // so the fewest sockets is two and the best fit keeps leftovers low.
    let c = choose(&t, &but(&t, &[0, 1, 4]), 4).unwrap();
    assert_eq!((c.score.sockets, c.gpus.as_slice()), (2, &[2, 3, 5, 6][..]));
    assert_eq!(c.cores.to_string(), "0-111");
}

#[test]
fn dgx_best_fit_keeps_whole_sockets_free() {
    let t = shipped("dgx-h100.toml");
    // GPU 4 busy: a 2-GPU job goes where it leaves fewest stranded GPUs (socket 1),
    // keeping socket 0's four together for a 4-GPU job.
    assert_eq!(choose(&t, &but(&t, &[4]), 2).unwrap().gpus, [5, 6]);
    assert_eq!(choose(&t, &all(&t), 8).unwrap().cores.to_string(), "0-111");
    assert_eq!(choose(&t, &all(&t), 1).unwrap().gpus, [0]);
}

#[test]
fn hgx_a100_keeps_numa_pairs_together() {
    let t = shipped("hgx-a100.toml");
    let c = choose(&t, &all(&t), 2).unwrap();
    assert_eq!((c.gpus.as_slice(), c.cores.to_string().as_str()), (&[0, 1][..], "48-63"));
    let c = choose(&t, &all(&t), 4).unwrap();
    assert_eq!((c.gpus.as_slice(), c.cores.to_string().as_str()), (&[0, 1, 2, 3][..], "16-31,48-63"));
    // GPU 0 busy: 1 alone on NUMA 3 is the best fit for one GPU.
    assert_eq!(choose(&t, &but(&t, &[0]), 1).unwrap().gpus, [1]);
}

#[test]
fn l40s_stays_on_one_socket() {
    let t = shipped("pcie-l40s.toml");
    let c = choose(&t, &but(&t, &[0]), 4).unwrap();
    assert_eq!((c.gpus.as_slice(), c.cores.to_string().as_str()), (&[4, 5, 6, 7][..], "32-63"));
}

#[test]
fn bad_requests_are_errors() {
    let t = shipped("pcie-a100-nvlink-pairs.toml");
    assert_eq!(choose(&t, &all(&t), 0), Err(ChooseError::Zero));
    assert_eq!(choose(&t, &[0, 1], 3), Err(ChooseError::NotEnoughFree { wanted: 3, free: 2 }));
    assert_eq!(choose(&t, &[0, 9], 1), Err(ChooseError::UnknownGpu { gpu: 9, count: 4 }));
    assert_eq!(choose(&t, &[1, 0, 1], 2).unwrap().gpus, [0, 1]);
}

#[test]
fn a_gpu_in_mig_mode_is_never_chosen_whole() {
    let t = shipped("a100-pcie-mig.toml");
    assert_eq!(choose(&t, &all(&t), 3).unwrap().gpus, [1, 2, 3]);
    assert_eq!(choose(&t, &all(&t), 4), Err(ChooseError::NotEnoughFree { wanted: 4, free: 3 }));
}

/// The reference: every subset of the node's GPUs as a bit mask, scored from scratch.
fn brute_force(t: &Topology, free: &[usize], k: usize) -> Option<(Score, Vec<usize>)> {
    let n = t.gpus.len();
    let free: Vec<usize> = free.iter().copied().filter(|&g| t.gpus[g].mig.is_empty()).collect();
    let free_mask: u32 = free.iter().map(|&g| 1 << g).sum();
    let rows = t.nvlink.rows();
    let mut best: Option<(Score, Vec<usize>)> = None;
    for mask in 0u32..(1 << n) {
        if mask & !free_mask != 0 || mask.count_ones() as usize != k {
            continue;
        }
        let set: Vec<usize> = (0..n).filter(|g| mask & (1 << g) != 0).collect();
        let socket = |g: usize| t.numa.iter().find(|x| x.id == t.gpus[g].numa).unwrap().socket;
        let mut s = Score::default();
        for &a in &set {
            for &b in &set {
                if a < b {
                    let l = rows[a][b] as u32;
                    if l == 0 {
                        s.disconnected_pairs += 1;
                    }
                    s.lanes += l;
                }
            }
        }
        let mut sockets: Vec<u32> = set.iter().map(|&g| socket(g)).collect();
        sockets.sort();
        sockets.dedup();
        let mut numas: Vec<u32> = set.iter().map(|&g| t.gpus[g].numa).collect();
        numas.sort();
        numas.dedup();
        s.sockets = sockets.len() as u32;
        s.numa_nodes = numas.len() as u32;
        s.socket_leftover = free.iter().filter(|&&g| sockets.contains(&socket(g)) && !set.contains(&g)).count() as u32;
        s.numa_leftover = free.iter().filter(|&&g| numas.contains(&t.gpus[g].numa) && !set.contains(&g)).count() as u32;
        let better = match &best {
            None => true,
            Some((bs, bset)) => (s, &set) < (*bs, bset),
        };
        if better {
            best = Some((s, set));
        }
    }
    best
}

fn agrees(t: &Topology, free: &[usize], k: usize) -> Result<(), String> {
    let got = choose(t, free, k).ok().map(|c| {
        assert_eq!(score(t, free, &c.gpus).unwrap(), c.score);
        (c.score, c.gpus)
    });
    let want = if k == 0 { None } else { brute_force(t, free, k) };
    if got == want {
        Ok(())
    } else {
        Err(format!("free {free:?}, k {k}: chose {got:?}, optimum {want:?}"))
    }
}

#[test]
fn choice_is_the_brute_force_optimum_on_every_shipped_node_and_busy_set() {
    for name in SHIPPED {
        let t = shipped(name);
        let n = t.gpus.len();
        for busy in 0u32..(1 << n) {
            let free: Vec<usize> = (0..n).filter(|g| busy & (1 << g) == 0).collect();
            for k in 1..=8 {
                agrees(&t, &free, k).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
}

/// Random nodes: up to 8 GPUs, 1-2 sockets of 1-2 NUMA nodes, any symmetric lane matrix.
fn arb_topology() -> impl Strategy<Value = Topology> {
    (1usize..=8, 1u32..=2, 1u32..=2).prop_flat_map(|(n, sockets, numa_per_socket)| {
        let numas = sockets * numa_per_socket;
        (
            Just((n, sockets, numa_per_socket)),
            proptest::collection::vec(0..numas, n),
            proptest::collection::vec(prop_oneof![Just(0u32), 1u32..=2], n * n),
            any::<bool>(),
        )
            .prop_map(|((n, sockets, per), gpu_numa, raw, switch)| {
                let cps = 4 * per;
                let numa = (0..sockets * per)
                    .map(|id| NumaNode { id, socket: id / per, cores: (id * 4..id * 4 + 4).collect() })
                    .collect::<Vec<_>>();
                let lanes = (0..n).map(|i| (0..n).map(|j| raw[i.min(j) * n + i.max(j)]).collect()).collect();
                let gpus = (0..n)
                    .map(|i| Gpu {
                        index: i,
                        name: "G".into(),
                        type_name: "g".into(),
                        memory_mib: 1,
                        pci_bus_id: format!("00000000:{:02X}:00.0", i + 1),
                        uuid: format!("GPU-{i}"),
                        minor: i as u32,
                        numa: gpu_numa[i],
                        cores: numa[gpu_numa[i] as usize].cores.clone(),
                        mig: vec![],
                    })
                    .collect();
                let nvlink = if switch { NvLinks::switch(n, 2) } else { NvLinks::direct(lanes) };
                Topology {
                    name: None,
                    cpu: Cpu { sockets, cores_per_socket: cps, threads_per_core: 1 },
                    numa,
                    gpus,
                    nvlink,
                }
            })
    })
}

proptest! {
    #[test]
    fn choice_is_the_brute_force_optimum_on_random_nodes(
        t in arb_topology(),
        busy in any::<u8>(),
        k in 1usize..=8,
    ) {
        let free: Vec<usize> = (0..t.gpus.len()).filter(|g| busy & (1 << g) == 0).collect();
        prop_assert_eq!(agrees(&t, &free, k), Ok(()));
    }

    #[test]
    fn random_nodes_round_trip_through_the_file_format(t in arb_topology()) {
        prop_assert_eq!(Topology::parse(&t.to_toml(), Path::new("x")).unwrap(), t);
    }
}
