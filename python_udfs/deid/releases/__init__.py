"""What is done with a committed release: reconstruction, utility measures."""
