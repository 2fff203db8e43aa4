//! assoc_mgr's association tree in and out of `fairway_core::fairshare`: snapshot and
//! write-back around the fair-share passes, usage decay, and shares renormalisation.
//!
//! Each function takes the assoc_mgr locks it needs (see [`crate::locks`]) except
//! [`set_assoc_usage`] and [`snapshot`]/[`write_back`], whose callers hold them.

use std::collections::HashMap;
use std::os::raw::c_int;

use fairway_core::fairshare::{Assoc, AssocTree, ClassicMode};
use slurm_sys as sys;

use crate::ctld::Ctld;
use crate::knobs::Knobs;
use crate::list::for_each;
use crate::locks::{assoc_lock, with_assoc_mgr};
use crate::long_double::{fairway_read_long_double, fairway_scale_long_double, fairway_write_long_double};

/// Whether assoc_mgr has an association tree (it has none without slurmdbd).
pub(crate) fn has_root() -> bool {
    // SAFETY: plain read of assoc_mgr's root pointer.
    !unsafe { std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read() }.is_null()
}

/// The account Slurm gives a job of `uid` that names none: the user's default account in
/// the association manager, as job_submit/lua offers it (`default_account`). `None`
/// outside slurmctld, without slurmdbd's user list, or for a user it does not know.
#[cfg_attr(test, allow(dead_code))]
pub(crate) fn default_account(uid: u32) -> Option<String> {
    let ctld = crate::ctld::ctld()?;
    let lock = sys::assoc_mgr_lock_t { user: sys::READ_LOCK, ..Default::default() };
    with_assoc_mgr(lock, || {
        // SAFETY: the user read lock is held, as `locked = true` wants, and the user list
        // is checked first (a locked call does not load it; enforce 0 never asserts it).
        // `user` is zeroed; Slurm only points its fields into its own record, and the
        // account name is copied out before the lock is released.
        unsafe {
            if std::ptr::addr_of!(sys::assoc_mgr_user_list).read().is_null() {
                return None;
            }
            let mut user: sys::slurmdb_user_rec_t = std::mem::zeroed();
            user.uid = uid;
            let rc = sys::assoc_mgr_fill_in_user(*ctld.acct_db_conn, &mut user, 0, std::ptr::null_mut(), true);
            if rc != sys::SLURM_SUCCESS as c_int || user.default_acct.is_null() {
                return None;
            }
            let acct = std::ffi::CStr::from_ptr(user.default_acct).to_string_lossy().into_owned();
            (!acct.is_empty()).then_some(acct)
        }
    })
}

/// As multifactor's init: root's effective usage is 1.
pub(crate) fn init_root_usage() {
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc write lock held; root is NULL or a live association.
        unsafe {
            let root = std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read();
            if let Some(u) = root.as_ref().and_then(|r| r.usage.as_mut()) {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), 1.0);
            }
        }
    });
}

/// Classic (or depth-oblivious) fair share: every account's effective usage, users'
/// left to [`set_assoc_usage`] on demand.
pub(crate) fn classic_pass(mode: ClassicMode) {
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        let (mut tree, ptrs) = snapshot();
        tree.classic(mode);
        write_back(&tree, &ptrs, false);
    });
}

/// Fair Tree: every association's level fair share and users' fair-share factors.
pub(crate) fn fair_tree_pass() {
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        let (mut tree, ptrs) = snapshot();
        // SAFETY: plain read of assoc_mgr's user association count (lock held).
        let users = unsafe { std::ptr::addr_of!(sys::g_user_assoc_count).read() };
        tree.fair_tree(users);
        write_back(&tree, &ptrs, true);
    });
}

/// Snapshots the association tree (assoc_mgr lock held) into core form.
///
/// Children come from each association's `children_list`, which assoc_mgr fills by
/// *fair-share* parent: a user under a `Fairshare=parent` account is listed under the
/// first ancestor with shares of its own, as both fair-share algorithms expect.
fn snapshot() -> (AssocTree, Vec<*mut sys::slurmdb_assoc_rec_t>) {
    let mut tree = AssocTree::default();
    let mut ptrs: Vec<*mut sys::slurmdb_assoc_rec_t> = Vec::new();
    let mut kids: Vec<Vec<*mut sys::slurmdb_assoc_rec_t>> = Vec::new();
    let mut index: HashMap<usize, usize> = HashMap::new();
    // SAFETY: the caller holds the assoc lock; every association and its usage struct
    // stay valid until it is released.
    unsafe {
        let root = std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read();
        let mut stack = vec![root];
        while let Some(a) = stack.pop() {
            if a.is_null() || index.contains_key(&(a as usize)) {
                continue;
            }
            index.insert(a as usize, ptrs.len());
            ptrs.push(a);
            let r = &*a;
            let mut children = Vec::new();
            let node = match r.usage.as_ref() {
                Some(u) => {
                    for_each(u.children_list, |c| children.push(c.cast::<sys::slurmdb_assoc_rec_t>()));
                    Assoc {
                        is_user: !r.user.is_null(),
                        use_parent: r.shares_raw == sys::SLURMDB_FS_USE_PARENT,
                        shares_raw: r.shares_raw,
                        level_shares: u.level_shares,
                        shares_norm: u.shares_norm,
                        usage_raw: fairway_read_long_double(std::ptr::addr_of!(u.usage_raw).cast()),
                        ..Assoc::default()
                    }
                }
                None => Assoc::default(),
            };
            tree.nodes.push(node);
            stack.extend(children.iter().rev().copied());
            kids.push(children);
        }
        let lookup = |p: *mut sys::slurmdb_assoc_rec_t| index.get(&(p as usize)).copied();
        for (i, &a) in ptrs.iter().enumerate() {
            tree.nodes[i].children = kids[i].iter().filter_map(|&c| lookup(c)).collect();
            if let Some(u) = (*a).usage.as_ref() {
                tree.nodes[i].parent = lookup(u.parent_assoc_ptr);
                tree.nodes[i].fs_parent = lookup(u.fs_assoc_ptr);
            }
        }
    }
    (tree, ptrs)
}

/// Writes computed fair-share fields back (assoc_mgr write lock held).
fn write_back(tree: &AssocTree, ptrs: &[*mut sys::slurmdb_assoc_rec_t], fair_tree: bool) {
    if fair_tree {
        // SAFETY: root is ptrs[0]; lock held as below.
        unsafe {
            if let Some(u) = ptrs.first().and_then(|&r| (*r).usage.as_mut()) {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.level_fs).cast(), tree.nodes[0].level_fs);
            }
        }
    }
    // Root's own usage fields are assoc_mgr's (multifactor never computes them).
    for (n, &a) in tree.nodes.iter().zip(ptrs).skip(1) {
        // SAFETY: as in `snapshot`; the lock is still held.
        unsafe {
            let Some(u) = (*a).usage.as_mut() else { continue };
            if fair_tree {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), n.usage_efctv);
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), n.usage_norm);
                fairway_write_long_double(std::ptr::addr_of_mut!(u.level_fs).cast(), n.level_fs);
                if n.is_user {
                    u.fs_factor = n.fs_factor;
                }
            } else {
                fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), n.usage_efctv);
                if !n.is_user {
                    fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), n.usage_norm);
                }
            }
        }
    }
}

/// `priority_p_set_assoc_usage` (classic): slurmctld calls it, assoc lock held, for an
/// association whose effective usage is not computed yet (e.g. for `sshare`).
///
/// # Safety
/// `assoc` is NULL or a live association, and the caller holds assoc_mgr's assoc lock.
pub unsafe fn set_assoc_usage(assoc: *mut sys::slurmdb_assoc_rec_t) {
    if assoc.is_null() {
        return;
    }
    let knobs = Knobs::read();
    let (mut tree, ptrs) = snapshot();
    // Root has no fair-share parent; multifactor never computes its usage either.
    let Some(i) = ptrs.iter().position(|&p| p == assoc).filter(|&i| i != AssocTree::ROOT) else { return };
    // Effective usage depends on the fs parent's, computed top down.
    let mut chain = vec![i];
    while let Some(p) = tree.nodes[*chain.last().unwrap()].fs_parent {
        if p == AssocTree::ROOT {
            break;
        }
        chain.push(p);
    }
    for &n in chain.iter().rev() {
        tree.set_assoc_usage(n, knobs.classic_mode());
    }
    // SAFETY: caller holds the assoc lock; `assoc` is a live association.
    unsafe {
        if let Some(u) = (*assoc).usage.as_mut() {
            fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_norm).cast(), tree.nodes[i].usage_norm);
            fairway_write_long_double(std::ptr::addr_of_mut!(u.usage_efctv).cast(), tree.nodes[i].usage_efctv);
        }
    }
}

/// `_set_norm_shares`: after `scontrol reconfigure` switched Fair Tree on or off,
/// renormalises every association's shares the way the new algorithm expects.
pub fn renormalize_shares() {
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::NO_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc write lock held; associations stay valid while it is.
        unsafe {
            let root = std::ptr::addr_of!(sys::assoc_mgr_root_assoc).read();
            let mut stack: Vec<*mut sys::slurmdb_assoc_rec_t> = Vec::new();
            if let Some(u) = root.as_ref().and_then(|r| r.usage.as_ref()) {
                for_each(u.children_list, |c| stack.push(c.cast()));
            }
            while let Some(a) = stack.pop() {
                sys::assoc_mgr_normalize_assoc_shares(a);
                if (*a).user.is_null() {
                    if let Some(u) = (*a).usage.as_ref() {
                        for_each(u.children_list, |c| stack.push(c.cast()));
                    }
                }
            }
        }
    });
}

/// `_apply_decay`: decays usage of every association and of QOS without NoDecay.
pub(crate) fn apply_decay(ctld: &Ctld, real_decay: f64) {
    if real_decay == 1.0 {
        return;
    }
    let tres = ctld.tres_cnt();
    with_assoc_mgr(assoc_lock(sys::WRITE_LOCK, sys::WRITE_LOCK, sys::NO_LOCK), || {
        // SAFETY: assoc and QOS write locks held; lists and records stay valid.
        unsafe {
            let decay_usage = |u: *mut sys::slurmdb_assoc_usage| {
                let Some(u) = u.as_mut() else { return };
                fairway_scale_long_double(std::ptr::addr_of_mut!(u.usage_raw).cast(), real_decay);
                if !u.usage_tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_scale_long_double(u.usage_tres_raw.cast::<[u8; 16]>().add(t).cast(), real_decay);
                    }
                }
                u.grp_used_wall *= real_decay;
            };
            for_each(std::ptr::addr_of!(sys::assoc_mgr_assoc_list).read(), |p| {
                let a = &*p.cast::<sys::slurmdb_assoc_rec_t>();
                decay_usage(a.usage);
                if !a.leaf_usage.is_null() && a.leaf_usage != a.usage {
                    decay_usage(a.leaf_usage);
                }
            });
            for_each(std::ptr::addr_of!(sys::assoc_mgr_qos_list).read(), |p| {
                let q = &*p.cast::<sys::slurmdb_qos_rec_t>();
                if q.flags & sys::QOS_FLAG_NO_DECAY != 0 {
                    return;
                }
                let Some(u) = q.usage.as_mut() else { return };
                fairway_scale_long_double(std::ptr::addr_of_mut!(u.usage_raw).cast(), real_decay);
                if !u.usage_tres_raw.is_null() {
                    for t in 0..tres {
                        fairway_scale_long_double(u.usage_tres_raw.cast::<[u8; 16]>().add(t).cast(), real_decay);
                    }
                }
                u.grp_used_wall *= real_decay;
            });
        }
    });
}
