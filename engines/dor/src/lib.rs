//! smcore routing engine: dimension-order routing (dor).
