"""The request: who may ask (access), what is asked (options, selection), the release it names."""
