"""Write: a release plan's tables into deid's schema through binary COPY files."""
