//! smcore routing engine: LASH (layered shortest path).
