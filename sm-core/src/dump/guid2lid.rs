//! `guid2lid`: OpenSM's LID cache (in `OSM_CACHE_DIR`, not with the other
//! dumps), read back at start-up so ports keep their LIDs across restarts.
//!
//! One record per port that owns LIDs (switch port 0, CA and router ports):
//! `0x<port GUID> 0x<first LID> 0x<last LID>`. OpenSM's database writer ends
//! every record with an empty line, and its reader treats an empty line as
//! the end of a record, so the blank lines are part of the format.
//!
//! OpenSM writes the records in the order of its internal hash table; we use
//! the order of its port GUID map, as the SL2VL dump does. The reader does
//! not care.

use std::io::{self, Write};

use super::{lid_range_end, Ctx, DumpInput};

/// Write `guid2lid`.
pub fn write_guid2lid(out: &mut impl Write, input: &DumpInput<'_>) -> io::Result<()> {
    write(out, &Ctx::new(*input)?)
}

pub(crate) fn write(w: &mut dyn Write, ctx: &Ctx<'_>) -> io::Result<()> {
    for &index in &ctx.lid_ports_in_order {
        let p = ctx.port(index);
        writeln!(w, "0x{:016x} 0x{:04x} 0x{:04x}\n", p.guid, p.lid, lid_range_end(p))?;
    }
    Ok(())
}
