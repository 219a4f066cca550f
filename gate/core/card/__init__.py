"""The verdict card and everything that binds it or checks it: the card's model and `accept` (`card`),
stamping a run into one (`stamp`), accept's proof that recomputes instead of believing (`acceptance`),
what differs between two cards (`carddiff`), the trial records it binds and the re-fold
(`evidence`), DSSE envelopes and signed cards (`dsse`, `signedcard`), and the calibration behind a
row's deadline source (`calibration`). Builds on every room below it.
"""
