//! smcore routing engine: the file engine (LFTs loaded from a dump).
