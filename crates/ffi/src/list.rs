//! Slurm's linked lists (`List` before 24.11, `list_t *` after: both `struct xlist *`).

use std::os::raw::c_void;

use slurm_sys as sys;

/// A Slurm list pointer, whichever name the headers give it.
pub type SlurmList = *mut sys::xlist;

/// Calls `f` on every element of a Slurm list (caller holds the list's lock).
pub(crate) fn for_each(list: SlurmList, mut f: impl FnMut(*mut c_void)) {
    if list.is_null() {
        return;
    }
    // SAFETY: a valid list; the iterator is destroyed before returning.
    unsafe {
        let it = sys::list_iterator_create(list);
        loop {
            let p = sys::list_next(it);
            if p.is_null() {
                break;
            }
            f(p);
        }
        sys::list_iterator_destroy(it);
    }
}
