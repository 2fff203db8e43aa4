//! Strings and arrays owned by Slurm's allocator.

use std::ffi::CString;
use std::os::raw::{c_char, c_void};
use std::ptr::NonNull;

use slurm_sys::libslurmfull::{slurm_xcalloc, slurm_xfree, slurm_xstrdup};

/// A NUL-terminated string allocated with Slurm's `xmalloc`, so Slurm may `xfree` it.
///
/// Use it for everything handed to Slurm to keep (`err_msg`, fields of `job_desc`).
/// Dropping it frees it with `xfree`; [`SlurmString::into_raw`] hands ownership over.
/// Construction never panics: interior NULs become `\u{2400}`.
pub struct SlurmString(NonNull<c_char>);

impl SlurmString {
    /// Copies `s` into Slurm's heap.
    pub fn new(s: &str) -> Self {
        let c = CString::new(s.replace('\0', "\u{2400}")).unwrap_or_default();
        // SAFETY: `c` is a valid NUL-terminated string; slurm_xstrdup copies it and
        // aborts the process itself on allocation failure, so it never returns NULL
        // for a non-NULL argument.
        let p = unsafe { slurm_xstrdup(c.as_ptr()) };
        Self(NonNull::new(p).expect("xstrdup returned NULL"))
    }

    /// Gives the pointer to Slurm, which becomes responsible for `xfree`ing it.
    pub fn into_raw(self) -> *mut c_char {
        let p = self.0.as_ptr();
        std::mem::forget(self);
        p
    }
}

impl Drop for SlurmString {
    fn drop(&mut self) {
        let mut p = self.0.as_ptr().cast::<c_void>();
        // SAFETY: the pointer came from slurm_xstrdup and has not been handed over.
        unsafe { slurm_xfree(&mut p) };
    }
}

/// Replaces `*slot` (a Slurm-owned `char *`, e.g. `err_msg`) with `msg`, freeing any
/// previous string with `xfree`.
///
/// # Safety
/// `slot` must be NULL or point to a `char *` that is NULL or `xmalloc`ed.
pub unsafe fn replace_slurm_str(slot: *mut *mut c_char, msg: &str) {
    if slot.is_null() {
        return;
    }
    // SAFETY: per the contract, `*slot` is NULL or xmalloc'ed; xfree accepts both and
    // nulls the pointer.
    unsafe {
        slurm_xfree(slot.cast());
        *slot = SlurmString::new(msg).into_raw();
    }
}

/// `n` zeroed `T`s from Slurm's allocator (aborts on failure, as xcalloc does).
///
/// # Safety
/// The result must be freed by Slurm (or `xfree`), never by Rust.
pub unsafe fn xcalloc<T>(n: usize, what: &std::ffi::CStr) -> *mut T {
    // SAFETY: per the contract.
    unsafe { slurm_xcalloc(n, std::mem::size_of::<T>(), true, false, c"fairway".as_ptr(), 0, what.as_ptr()).cast() }
}
