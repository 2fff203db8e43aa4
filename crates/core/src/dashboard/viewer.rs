//! What one signed-in viewer may see of the board: what Slurm shows that user under
//! `PrivateData`, so the page reveals no more than squeue, sshare and sinfo would.

use serde::Serialize;

use super::{AlertKind, Board};

/// slurm.conf's `PrivateData` flags that decide what the page shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PrivateData {
    /// `jobs`: users see only their own jobs.
    pub jobs: bool,
    /// `usage`: users see only their own usage (sshare).
    pub usage: bool,
    /// `nodes`: users see no node information.
    pub nodes: bool,
}

impl PrivateData {
    /// From the value `scontrol show config` prints (`jobs,usage`, `none`).
    pub fn parse(value: &str) -> Self {
        let flags: Vec<String> = value.split(',').map(|f| f.trim().to_ascii_lowercase()).collect();
        let has = |f: &str| flags.iter().any(|x| x == f);
        Self { jobs: has("jobs"), usage: has("usage"), nodes: has("nodes") }
    }
}

/// Who is looking.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Viewer {
    /// Their user name.
    pub user: String,
    /// root, SlurmUser, or an Operator/Administrator in the accounting database: Slurm
    /// shows them everything.
    pub sees_all: bool,
}

impl Board {
    /// The board as `viewer` may see it.
    pub fn as_seen_by(&self, viewer: &Viewer, private: PrivateData) -> Board {
        let mut b = self.clone();
        if viewer.sees_all {
            return b;
        }
        if private.jobs {
            let own = |j: &super::Job| j.user == viewer.user;
            for p in &mut b.partitions {
                p.pending.retain(own);
                p.running.retain(own);
            }
            b.gangs.retain(own);
            // These name or count other users' jobs.
            b.alerts.retain(|a| {
                !matches!(
                    a.kind,
                    AlertKind::NearStarvationBound | AlertKind::GpusIdleWhileJobsPend | AlertKind::NodeLostUnderGang
                )
            });
        }
        if private.usage {
            b.fair_share = own_shares(&b, &viewer.user);
            b.alerts.retain(|a| a.kind != AlertKind::AccountFarFromShare);
        }
        if private.nodes {
            b.nodes.clear();
            for p in &mut b.partitions {
                p.gpus = 0;
                p.idle_gpus = 0;
            }
        }
        b
    }
}

/// The viewer's own user associations (sshare shows a user nothing else under
/// `PrivateData=usage`).
fn own_shares(b: &Board, user: &str) -> Vec<super::Share> {
    b.fair_share.iter().filter(|s| s.user == user).cloned().collect()
}
