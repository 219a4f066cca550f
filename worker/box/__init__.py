"""Code that runs inside the sandbox container: the supervisor, the probe process and the
filesystem diff. Standard library only (a test checks every import): the files are mounted into
an image that holds nothing but Python, and the supervisor imports its siblings by bare name.
"""
