//! The C shim's (`csrc/long_double.c`) access to `long double` fields (usage_raw,
//! usage_efctv, level_fs...), which stable Rust cannot type: each pointer is the field's
//! address, and the caller holds the lock that guards it.

use std::os::raw::c_void;

extern "C" {
    pub(crate) fn fairway_read_long_double(p: *const c_void) -> f64;
    pub(crate) fn fairway_write_long_double(p: *mut c_void, v: f64);
    pub(crate) fn fairway_scale_long_double(p: *mut c_void, factor: f64);
    pub(crate) fn fairway_add_long_double(p: *mut c_void, v: f64);
}
