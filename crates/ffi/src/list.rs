//! Slurm's linked lists (`List` before 24.11, `list_t *` after: both `struct xlist *`).

use std::any::Any;
use std::os::raw::{c_int, c_void};
use std::panic::AssertUnwindSafe;

use slurm_sys as sys;

/// A Slurm list pointer, whichever name the headers give it.
pub type SlurmList = *mut sys::xlist;

/// Calls `f` on every element of a Slurm list (caller holds the lock of what the list
/// holds; `f` must not add to or remove from this list).
///
/// Walks with `list_for_each_ro`, which takes the list's own lock once, where an
/// iterator's `list_next` takes and releases it per element: over slurmctld's job list
/// that per-element locking was a quarter of a priority pass. A panic in `f` stops the
/// walk and resumes after the list's lock is released, never unwinding through C.
pub(crate) fn for_each<F: FnMut(*mut c_void)>(list: SlurmList, mut f: F) {
    if list.is_null() {
        return;
    }
    struct Walk<'a, F> {
        f: &'a mut F,
        panic: Option<Box<dyn Any + Send>>,
    }
    unsafe extern "C" fn visit<F: FnMut(*mut c_void)>(x: *mut c_void, arg: *mut c_void) -> c_int {
        // SAFETY: `arg` is the `Walk` below, alive for the whole list_for_each_ro call.
        let walk = unsafe { &mut *arg.cast::<Walk<'_, F>>() };
        match std::panic::catch_unwind(AssertUnwindSafe(|| (walk.f)(x))) {
            Ok(()) => 0,
            Err(p) => {
                walk.panic = Some(p);
                -1 // stops the walk
            }
        }
    }
    let mut walk = Walk { f: &mut f, panic: None };
    // SAFETY: a valid list; `visit::<F>` matches ListForF and gets our `walk`.
    unsafe { sys::list_for_each_ro(list, Some(visit::<F>), std::ptr::addr_of_mut!(walk).cast()) };
    if let Some(p) = walk.panic {
        std::panic::resume_unwind(p);
    }
}
