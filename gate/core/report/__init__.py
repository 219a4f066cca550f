"""What is written from a card for people and CI: JUnit XML (`junit`), the Markdown summary
(`markdown`), the HTML page (`html`, with its SPRT path `html_sprt`, its "trials to look at"
`html_trials` and its escaping markup layer `html_dom`), the reviewers' view of the evidence
(`evidence_view`) and the freeze and lift proposals and repair task beside a card (`proposals`).
The top room of the core.
"""
