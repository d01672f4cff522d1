//! The allocator: glibc's malloc arenas (nothing on other C libraries).

/// Caps the number of glibc malloc arenas (M_ARENA_MAX; by default up to 8 × cores, each
/// keeping freed memory of its own). Nothing on other C libraries.
pub fn set_malloc_arena_max(arenas: i32) {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
    #[cfg(not(target_env = "gnu"))]
    let _ = arenas;
}

/// Gives the free memory glibc's malloc holds back to the system (malloc_trim(0)). Nothing
/// on other C libraries.
pub fn malloc_trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
