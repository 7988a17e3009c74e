"""The portal's own number and date formats by language, where Django's differ from what its readers expect
(``FORMAT_MODULE_PATH``); every name not set here is Django's."""
