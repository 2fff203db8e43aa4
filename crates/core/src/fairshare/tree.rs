//! The association tree and the two fair-share algorithms over it.
//!
//! `slurmctld` keeps associations in `assoc_mgr`; the priority plugin snapshots the
//! fields below into an [`AssocTree`], runs [`AssocTree::fair_tree`] or
//! [`AssocTree::classic`], and writes the results back. The simulator builds the same
//! tree from its own accounts. The arithmetic follows `fair_tree.c` and
//! `priority_multifactor.c` of Slurm 22.05, including their quirks, so `sshare -l`
//! shows the same numbers under `priority/fairway` as under `priority/multifactor`.

/// Slurm's `NO_VAL`, the marker for "not computed" in `usage_efctv` and `level_fs`.
pub const NO_VAL: f64 = 4_294_967_294.0;

/// One association: an account, or a user within an account.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assoc {
    /// Name, for messages and tests (`account` or `account/user`).
    pub name: String,
    /// Parent association (`None` for root).
    pub parent: Option<usize>,
    /// The association whose shares this one competes under: the parent, or for a
    /// parent with `Fairshare=parent`, that parent's own `fs` parent.
    pub fs_parent: Option<usize>,
    /// Associations whose fair-share parent this is (assoc_mgr's `children_list`, in
    /// its order): children of a `Fairshare=parent` account are listed here, under the
    /// first ancestor with shares of its own, not under that account.
    pub children: Vec<usize>,
    /// Whether this is a user association.
    pub is_user: bool,
    /// `Fairshare=parent`.
    pub use_parent: bool,
    /// `Fairshare=` (raw shares).
    pub shares_raw: u32,
    /// Sum of the raw shares of this association and its siblings.
    pub level_shares: u32,
    /// Normalised shares, as `assoc_mgr` computed them.
    pub shares_norm: f64,
    /// Decayed usage (TRES-billing-seconds).
    pub usage_raw: f64,
    /// Output: `usage_raw` over root's.
    pub usage_norm: f64,
    /// Output: effective usage (classic) or usage relative to the parent (Fair Tree).
    pub usage_efctv: f64,
    /// Output (Fair Tree): level fair share, `S / U`.
    pub level_fs: f64,
    /// Output (Fair Tree, users): the fair-share factor, rank / user count.
    pub fs_factor: f64,
}

/// Associations with index 0 as root.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssocTree {
    /// All associations; `nodes[0]` is root.
    pub nodes: Vec<Assoc>,
}

/// How classic fair share computes effective usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicMode {
    /// `PriorityFlags=NO_FAIR_TREE`.
    Classic,
    /// `PriorityFlags=DEPTH_OBLIVIOUS`.
    DepthOblivious,
}

impl AssocTree {
    /// Root's index.
    pub const ROOT: usize = 0;

    /// `set_assoc_usage_norm()`: usage over root's usage, at most 1.
    pub fn set_usage_norm(&mut self, i: usize) {
        let root = self.nodes[Self::ROOT].usage_raw;
        let n = &mut self.nodes[i];
        n.usage_norm = if root == 0.0 { 0.0 } else { (n.usage_raw / root).min(1.0) };
    }

    /// `priority_p_set_assoc_usage()` for classic fair share: normalised and effective
    /// usage of one association (its fs parent must be done already).
    pub fn set_assoc_usage(&mut self, i: usize, mode: ClassicMode) {
        self.set_usage_norm(i);
        let efctv = match self.nodes[i].fs_parent {
            None => self.nodes[i].usage_norm,
            Some(p) if p == Self::ROOT => self.nodes[i].usage_norm,
            Some(p) if self.nodes[i].use_parent => self.nodes[p].usage_efctv,
            Some(p) => match mode {
                ClassicMode::DepthOblivious => self.depth_oblivious_efctv(i, p),
                ClassicMode::Classic => {
                    let n = &self.nodes[i];
                    let ue_parent = self.nodes[p].usage_efctv;
                    if n.level_shares == 0 {
                        ue_parent
                    } else {
                        n.usage_norm
                            + (ue_parent - n.usage_norm) * (f64::from(n.shares_raw) / f64::from(n.level_shares))
                    }
                }
            },
        };
        self.nodes[i].usage_efctv = efctv;
    }

    fn depth_oblivious_efctv(&self, i: usize, p: usize) -> f64 {
        const F: f64 = 5.0;
        let (n, parent) = (&self.nodes[i], &self.nodes[p]);
        if n.shares_norm == 0.0 || parent.shares_norm == 0.0 || parent.usage_efctv == 0.0 || n.usage_norm == 0.0 {
            return n.usage_norm;
        }
        let ratio_p = parent.usage_efctv / parent.shares_norm;
        let ratio_s: f64 = parent
            .children
            .iter()
            .map(|&c| &self.nodes[c])
            .filter(|s| !s.use_parent)
            .map(|s| s.usage_norm)
            .sum::<f64>()
            / parent.shares_norm;
        let ratio_l = (n.usage_norm / n.shares_norm) / ratio_s;
        let k = if ratio_p == 0.0 || ratio_l == 0.0 || ratio_p.ln() * ratio_l.ln() >= 0.0 {
            1.0
        } else {
            1.0 / (1.0 + (F * ratio_p.ln()).powi(2))
        };
        ratio_p * ratio_l.powf(k) * n.shares_norm
    }

    /// The decay pass of classic fair share (`_set_children_usage_efctv`): effective
    /// usage for every account, top down; users are marked "not computed" and done on
    /// demand by [`AssocTree::set_assoc_usage`], as Slurm does.
    pub fn classic(&mut self, mode: ClassicMode) {
        let mut stack: Vec<usize> = self.nodes[Self::ROOT].children.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            if self.nodes[i].is_user {
                self.nodes[i].usage_efctv = NO_VAL;
                continue;
            }
            self.set_assoc_usage(i, mode);
            stack.extend(self.nodes[i].children.iter().rev().copied());
        }
    }

    /// Fair Tree (`_apply_priority_fs`): level fair share per association, then users
    /// ranked depth first by it; `fs_factor = rank / user_assoc_count`.
    pub fn fair_tree(&mut self, user_assoc_count: u32) {
        self.nodes[Self::ROOT].level_fs = NO_VAL;
        let mut rank = user_assoc_count;
        let mut rnt = rank;
        let children = self.nodes[Self::ROOT].children.clone();
        self.calc_tree_fs(children, &mut rank, &mut rnt, false, user_assoc_count);
    }

    fn calc_assoc_fs(&mut self, i: usize) {
        // Fair Tree's U: usage relative to the fs parent's.
        let efctv = match self.nodes[i].fs_parent {
            Some(p) if self.nodes[p].usage_raw != 0.0 => self.nodes[i].usage_raw / self.nodes[p].usage_raw,
            _ => 0.0,
        };
        self.nodes[i].usage_efctv = efctv;
        self.set_usage_norm(i);
        let n = &mut self.nodes[i];
        n.level_fs = if n.use_parent {
            if n.is_user {
                f64::INFINITY
            } else {
                NO_VAL
            }
        } else if n.shares_norm == 0.0 {
            0.0
        } else {
            n.shares_norm / n.usage_efctv
        };
    }

    fn calc_tree_fs(
        &mut self,
        mut siblings: Vec<usize>,
        rank: &mut u32,
        rnt: &mut u32,
        account_tied: bool,
        users: u32,
    ) {
        for &i in &siblings {
            self.calc_assoc_fs(i);
        }
        // Highest level_fs first; users before accounts on ties. Stable, as glibc's
        // qsort (a merge sort for arrays this size) is in practice.
        siblings.sort_by(|&a, &b| {
            let (x, y) = (&self.nodes[a], &self.nodes[b]);
            if x.level_fs != y.level_fs {
                return if x.level_fs < y.level_fs { std::cmp::Ordering::Greater } else { std::cmp::Ordering::Less };
            }
            y.is_user.cmp(&x.is_user)
        });
        let mut prev_level_fs = NO_VAL;
        let mut i = 0;
        while i < siblings.len() {
            let a = siblings[i];
            let tied = if i == 0 && account_tied { true } else { prev_level_fs == self.nodes[a].level_fs };
            if self.nodes[a].is_user {
                if !tied {
                    *rank = *rnt;
                }
                self.nodes[a].fs_factor = f64::from(*rank) / f64::from(users);
                *rnt = rnt.saturating_sub(1);
            } else {
                // Slurm 22.05 counts *users* after the account here, which always
                // yields 0 (users sort before accounts on ties): tied accounts are
                // not merged. Kept as is for identical results.
                let mut merge = 0;
                while let Some(&next) = siblings.get(i + 1 + merge) {
                    if !self.nodes[next].is_user || self.nodes[a].level_fs != self.nodes[next].level_fs {
                        break;
                    }
                    merge += 1;
                }
                let children: Vec<usize> =
                    siblings[i..=i + merge].iter().flat_map(|&s| self.nodes[s].children.clone()).collect();
                if !children.is_empty() {
                    self.calc_tree_fs(children, rank, rnt, tied, users);
                }
                i += merge;
            }
            prev_level_fs = self.nodes[a].level_fs;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// root → {a (shares 60): users u1, u2; b (shares 40): user u3}
    fn tree(usage: [f64; 3]) -> AssocTree {
        let mut t = AssocTree::default();
        let mut add = |name: &str, parent: Option<usize>, user: bool, shares: u32| {
            let i = t.nodes.len();
            t.nodes.push(Assoc {
                name: name.into(),
                parent,
                fs_parent: parent,
                is_user: user,
                shares_raw: shares,
                ..Assoc::default()
            });
            if let Some(p) = parent {
                t.nodes[p].children.push(i);
            }
            i
        };
        let root = add("root", None, false, 1);
        let a = add("a", Some(root), false, 60);
        let b = add("b", Some(root), false, 40);
        add("a/u1", Some(a), true, 1);
        add("a/u2", Some(a), true, 1);
        add("b/u3", Some(b), true, 1);
        // shares as assoc_mgr normalises them (Fair Tree: within the level)
        for (i, s) in [(1, 0.6), (2, 0.4), (3, 0.5), (4, 0.5), (5, 1.0)] {
            t.nodes[i].shares_norm = s;
        }
        for (i, l) in [(1, 100), (2, 100), (3, 2), (4, 2), (5, 1)] {
            t.nodes[i].level_shares = l;
        }
        // usage rolls up to every ancestor
        for (user, u) in [3usize, 4, 5].into_iter().zip(usage) {
            let mut n = Some(user);
            while let Some(i) = n {
                t.nodes[i].usage_raw += u;
                n = t.nodes[i].parent;
            }
        }
        t
    }

    #[test]
    fn fair_tree_ranks_by_level_fair_share() {
        // a used 90 of 100 with 60% of shares; b used 10 with 40%: b ranks first.
        let mut t = tree([80.0, 10.0, 10.0]);
        t.fair_tree(3);
        let fs: Vec<f64> = (3..6).map(|i| t.nodes[i].fs_factor).collect();
        assert_eq!(fs, vec![1.0 / 3.0, 2.0 / 3.0, 1.0]);
        assert!((t.nodes[2].level_fs - 0.4 / 0.1).abs() < 1e-12);
    }

    #[test]
    fn fair_tree_without_usage_ties_everyone_at_the_top() {
        let mut t = tree([0.0; 3]);
        t.fair_tree(3);
        for i in 3..6 {
            assert_eq!(t.nodes[i].fs_factor, 1.0, "{}", t.nodes[i].name);
        }
    }

    #[test]
    fn zero_shares_rank_last_within_their_account() {
        let mut t = tree([1.0, 1.0, 1.0]);
        t.nodes[3].shares_norm = 0.0;
        t.fair_tree(3);
        // b (0.4 / (1/3)) outranks a (0.6 / (2/3)); inside a, u1 has no shares.
        let fs: Vec<f64> = (3..6).map(|i| t.nodes[i].fs_factor).collect();
        assert_eq!(fs, vec![1.0 / 3.0, 2.0 / 3.0, 1.0]);
        assert_eq!(t.nodes[3].level_fs, 0.0);
    }

    #[test]
    fn fairshare_parent_users_rank_first_in_their_account() {
        let mut t = tree([50.0, 1.0, 1.0]);
        t.nodes[3].use_parent = true;
        t.fair_tree(3);
        assert!(t.nodes[3].level_fs.is_infinite());
        assert!(t.nodes[3].fs_factor > t.nodes[4].fs_factor);
    }

    #[test]
    fn classic_effective_usage() {
        let mut t = tree([80.0, 10.0, 10.0]);
        t.classic(ClassicMode::Classic);
        // accounts directly under root: effective = normalised usage
        assert!((t.nodes[1].usage_efctv - 0.9).abs() < 1e-12);
        assert_eq!(t.nodes[3].usage_efctv, NO_VAL);
        t.set_assoc_usage(3, ClassicMode::Classic);
        // u1: 0.8 + (0.9 - 0.8) * 1/2
        assert!((t.nodes[3].usage_efctv - 0.85).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn fair_tree_factors_are_ranks(u in proptest::collection::vec(0.0f64..1000.0, 3)) {
            let mut t = tree([u[0], u[1], u[2]]);
            t.fair_tree(3);
            for i in 3..6 {
                let f = t.nodes[i].fs_factor * 3.0;
                prop_assert!((f - f.round()).abs() < 1e-9 && (1.0..=3.0).contains(&f.round()), "{}", f);
            }
            // the top-ranked user always gets 1
            prop_assert!((3..6).any(|i| t.nodes[i].fs_factor == 1.0));
        }

        #[test]
        fn within_an_account_less_usage_never_ranks_lower(a in 0.0f64..100.0, b in 0.0f64..100.0) {
            let mut t = tree([a, b, 5.0]);
            t.fair_tree(3);
            if a < b { prop_assert!(t.nodes[3].fs_factor >= t.nodes[4].fs_factor); }
            if b < a { prop_assert!(t.nodes[4].fs_factor >= t.nodes[3].fs_factor); }
        }

        #[test]
        fn usage_norm_is_at_most_one(u in proptest::collection::vec(0.0f64..1e9, 3)) {
            let mut t = tree([u[0], u[1], u[2]]);
            t.classic(ClassicMode::Classic);
            for i in 0..t.nodes.len() {
                t.set_usage_norm(i);
                prop_assert!((0.0..=1.0).contains(&t.nodes[i].usage_norm));
            }
        }
    }
}
