//! Asking the cache for memory ahead of its use.

/// Asks the cache for element `i` of `v` (nothing past its end), without
/// waiting for it.
#[inline]
pub(crate) fn prefetch<T>(v: &[T], i: usize) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    if let Some(w) = v.get(i) {
        // SAFETY: a prefetch is a hint that reads nothing and cannot
        // fault, and the build enables the SSE it needs (every x86-64
        // has it); a plain read here would hold the loop up until the
        // line arrives, which is what the prefetch is for.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(w as *const T as *const i8) };
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = (v, i);
}

/// Asks the cache for the entries `first` and `last` of a table row (the
/// lines a group of nearby LIDs reads), `last` only when on another line.
#[inline]
fn prefetch_span(row: &[u8], first: usize, last: usize) {
    prefetch(row, first);
    if last / 64 != first / 64 {
        prefetch(row, last);
    }
}

/// How many switches ahead a pass over every switch's table row for a few
/// LIDs asks for the row's lines: enough for the reads to overlap.
const ROWS_AHEAD: usize = 24;

/// In a pass over the switches of `order` that reads each one's row of
/// `rows` at LIDs `first..=last` (a line or two no other pass of the
/// thread reads soon), at position `i`: asks for those lines of the switch
/// [`ROWS_AHEAD`] further on, so that the reads overlap.
#[inline]
pub(crate) fn prefetch_ahead<R: AsRef<[u8]>>(rows: &[R], order: &[u32], i: usize, first: usize, last: usize) {
    if let Some(&a) = order.get(i + ROWS_AHEAD) {
        if let Some(row) = rows.get(a as usize) {
            prefetch_span(row.as_ref(), first, last);
        }
    }
}
