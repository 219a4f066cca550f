"""The coordinator's side of Celery: the executor `gate run` dispatches through, who runs what, which
answers count, gathering through outages, the control channel, image publication and broker users."""
